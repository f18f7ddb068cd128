package ingest

/*
#include <stdint.h>
#include <stdlib.h>

// From DuckDB's C API (duckdb.h), linked from duckdb-go's bindings; the
// header is not on this package's include path. duckdb-go wraps these
// only behind a build tag of its own; declared here, they need none.
typedef enum duckdb_state { DuckDBSuccess = 0, DuckDBError = 1 } duckdb_state;
typedef struct _duckdb_connection { void *internal_ptr; } *duckdb_connection;
typedef struct _duckdb_data_chunk { void *internal_ptr; } *duckdb_data_chunk;
typedef struct _duckdb_error_data { void *internal_ptr; } *duckdb_error_data;
typedef struct _duckdb_arrow_stream { void *internal_ptr; } *duckdb_arrow_stream;
typedef struct _duckdb_arrow_converted_schema { void *internal_ptr; } *duckdb_arrow_converted_schema;

// The Arrow C data interface's structs, as arrow/cdata defines them.
struct ArrowSchema {
	const char *format;
	const char *name;
	const char *metadata;
	int64_t flags;
	int64_t n_children;
	struct ArrowSchema **children;
	struct ArrowSchema *dictionary;
	void (*release)(struct ArrowSchema *);
	void *private_data;
};
struct ArrowArray {
	int64_t length;
	int64_t null_count;
	int64_t offset;
	int64_t n_buffers;
	int64_t n_children;
	const void **buffers;
	struct ArrowArray **children;
	struct ArrowArray *dictionary;
	void (*release)(struct ArrowArray *);
	void *private_data;
};
struct ArrowArrayStream {
	int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *);
	int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *);
	const char *(*get_last_error)(struct ArrowArrayStream *);
	void (*release)(struct ArrowArrayStream *);
	void *private_data;
};

duckdb_state duckdb_arrow_scan(duckdb_connection connection, const char *table_name, duckdb_arrow_stream arrow);
duckdb_error_data duckdb_schema_from_arrow(duckdb_connection connection, struct ArrowSchema *schema,
	duckdb_arrow_converted_schema *out_types);
duckdb_error_data duckdb_data_chunk_from_arrow(duckdb_connection connection, struct ArrowArray *arrow_array,
	duckdb_arrow_converted_schema converted_schema, duckdb_data_chunk *out_chunk);
void duckdb_destroy_arrow_converted_schema(duckdb_arrow_converted_schema *arrow_converted_schema);
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// Records reach DuckDB through its C API on the load's own connection: an
// Arrow stream scanned as a view (bulk loads' INSERT ... SELECT) or data
// chunks converted from Arrow arrays (the appender, chunks.go). duckdb-go
// offers both only behind a build tag; the few functions are declared
// above instead, so that the plain go toolchain builds shredduck.

// RawConn returns the C connection of a duckdb-go connection. The driver
// does not export it; its Conn keeps it in a field that is checked by type
// (reflect) before it is read, so that a driver whose layout differs makes
// this fail, and Begin with it, instead of reading garbage.
func RawConn(c *duckdb.Conn) (mapping.Connection, error) {
	f, ok := reflect.TypeOf(c).Elem().FieldByName("conn")
	if !ok || f.Type != reflect.TypeOf(mapping.Connection{}) {
		return mapping.Connection{}, errors.New("duckdb-go's Conn has no C connection field")
	}
	p := (*mapping.Connection)(unsafe.Add(unsafe.Pointer(c), f.Offset))
	if p.Ptr == nil {
		return mapping.Connection{}, errors.New("duckdb-go connection is closed")
	}
	return *p, nil
}

// registerView exports reader as a C Arrow stream and has DuckDB scan it
// as the view name on conn. DuckDB reads the stream, on its own threads,
// while statements select from the view; release frees it and must be
// called once, after the last of them has returned (never while one
// runs: DuckDB would call into freed memory). A reader whose Err is set
// makes the statement fail with that error.
func registerView(conn mapping.Connection, reader array.RecordReader, name string) (release func(), err error) {
	stream := (*C.struct_ArrowArrayStream)(C.calloc(1, C.sizeof_struct_ArrowArrayStream))
	cdata.ExportRecordReader(reader, (*cdata.CArrowArrayStream)(unsafe.Pointer(stream)))
	release = func() {
		cdata.ReleaseCArrowArrayStream((*cdata.CArrowArrayStream)(unsafe.Pointer(stream)))
		C.free(unsafe.Pointer(stream))
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.duckdb_arrow_scan(C.duckdb_connection(conn.Ptr), cname, C.duckdb_arrow_stream(unsafe.Pointer(stream))) != C.DuckDBSuccess {
		release()
		return nil, fmt.Errorf("DuckDB's arrow scan could not create view %s", name)
	}
	return release, nil
}

// convertedSchema is DuckDB's form of an Arrow schema, for
// dataChunkFromArrow; free it with destroy.
type convertedSchema struct {
	p C.duckdb_arrow_converted_schema
}

// schemaFromArrow converts schema as conn's settings say.
func schemaFromArrow(conn mapping.Connection, schema *arrow.Schema) (convertedSchema, error) {
	cs := (*C.struct_ArrowSchema)(C.calloc(1, C.sizeof_struct_ArrowSchema))
	defer func() {
		cdata.ReleaseCArrowSchema((*cdata.CArrowSchema)(unsafe.Pointer(cs)))
		C.free(unsafe.Pointer(cs))
	}()
	cdata.ExportArrowSchema(schema, (*cdata.CArrowSchema)(unsafe.Pointer(cs)))
	var out convertedSchema
	ed := C.duckdb_schema_from_arrow(C.duckdb_connection(conn.Ptr), cs, &out.p)
	if err := duckErr(mapping.ErrorData{Ptr: unsafe.Pointer(ed)}); err != nil {
		out.destroy()
		return convertedSchema{}, err
	}
	return out, nil
}

func (s *convertedSchema) destroy() {
	if s.p != nil {
		C.duckdb_destroy_arrow_converted_schema(&s.p)
		s.p = nil
	}
}

// dataChunkFromArrow converts rec, of the schema s was converted from, to
// a data chunk, which the caller destroys (mapping.DestroyDataChunk). The
// chunk points into rec's buffers: rec must outlive it.
func dataChunkFromArrow(conn mapping.Connection, rec arrow.RecordBatch, s convertedSchema) (mapping.DataChunk, error) {
	arr := (*C.struct_ArrowArray)(C.calloc(1, C.sizeof_struct_ArrowArray))
	defer func() {
		// DuckDB takes the array over; released here only if it did not.
		cdata.ReleaseCArrowArray((*cdata.CArrowArray)(unsafe.Pointer(arr)))
		C.free(unsafe.Pointer(arr))
	}()
	// The converted schema stands for the Arrow schema: none is exported.
	cdata.ExportArrowRecordBatch(rec, (*cdata.CArrowArray)(unsafe.Pointer(arr)), nil)
	var chunk C.duckdb_data_chunk
	ed := C.duckdb_data_chunk_from_arrow(C.duckdb_connection(conn.Ptr), arr, s.p, &chunk)
	out := mapping.DataChunk{Ptr: unsafe.Pointer(chunk)}
	if err := duckErr(mapping.ErrorData{Ptr: unsafe.Pointer(ed)}); err != nil {
		mapping.DestroyDataChunk(&out)
		return mapping.DataChunk{}, err
	}
	return out, nil
}
