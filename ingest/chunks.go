package ingest

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// Small transactions (the Committer's group commits, a few thousand rows)
// are appended through DuckDB's C appender, one data chunk converted from
// each Arrow slice of at most chunkRows rows, instead of through an
// INSERT ... SELECT over an Arrow scan. The INSERT runs as a parallel
// pipeline: each DuckDB thread fills its own row-group collection and, for
// fewer rows than a row group, copies it once more into the transaction's
// storage when the pipeline ends; DuckDB's worker threads wake for every
// statement. The appender writes into the transaction's storage directly on
// the calling thread. Bulk loads keep the INSERT, which uses every core.

// chunkRows is DuckDB's vector size: a data chunk holds at most this many
// rows.
const chunkRows = 2048

// chunkAppender appends Arrow records to one table's columns.
type chunkAppender struct {
	conn   mapping.Connection
	app    mapping.Appender
	schema convertedSchema
	open   bool
}

// duckErr returns ed as a *duckdb.Error, keeping DuckDB's error type
// (out of memory, I/O, ...), which decides whether a failed submission may
// be retried (failure.go), or nil when ed holds none. It destroys ed.
func duckErr(ed mapping.ErrorData) error {
	defer mapping.DestroyErrorData(&ed)
	if !mapping.ErrorDataHasError(ed) {
		return nil
	}
	return &duckdb.Error{Type: duckdb.ErrorType(mapping.ErrorDataErrorType(ed)), Msg: mapping.ErrorDataMessage(ed)}
}

// newChunkAppender opens an appender on table for the named columns (the
// others get their defaults, NULL) with schema as the records' schema.
func newChunkAppender(conn mapping.Connection, table string, schema *arrow.Schema) (*chunkAppender, error) {
	a := &chunkAppender{conn: conn}
	if mapping.AppenderCreateExt(conn, "", "", table, &a.app) == mapping.StateError {
		err := a.appErr()
		mapping.AppenderDestroy(&a.app)
		return nil, err
	}
	a.open = true
	for _, f := range schema.Fields() {
		if mapping.AppenderAddColumn(a.app, f.Name) == mapping.StateError {
			err := a.appErr()
			a.close()
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
	}
	cs, err := schemaFromArrow(conn, schema)
	if err != nil {
		a.close()
		return nil, err
	}
	a.schema = cs
	return a, nil
}

// appErr returns the appender's error after a call that failed.
func (a *chunkAppender) appErr() error {
	if err := duckErr(mapping.AppenderErrorData(a.app)); err != nil {
		return err
	}
	return errors.New("duckdb appender failed: " + mapping.AppenderError(a.app))
}

// append converts rec, chunkRows rows at a time, and appends it.
func (a *chunkAppender) append(rec arrow.RecordBatch) error {
	n := rec.NumRows()
	for lo := int64(0); lo < n; lo += chunkRows {
		hi := min(lo+chunkRows, n)
		part := rec
		if lo > 0 || hi < n {
			part = rec.NewSlice(lo, hi)
		}
		chunk, err := dataChunkFromArrow(a.conn, part, a.schema)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return err
		}
		st := mapping.AppendDataChunk(a.app, chunk)
		mapping.DestroyDataChunk(&chunk)
		if st == mapping.StateError {
			return a.appErr()
		}
	}
	return nil
}

// finish flushes the appended rows into the transaction and closes the
// appender.
func (a *chunkAppender) finish() error {
	var err error
	if mapping.AppenderFlush(a.app) == mapping.StateError {
		err = a.appErr()
	}
	a.close()
	return err
}

// discard drops the rows not yet flushed and closes the appender.
func (a *chunkAppender) discard() {
	if a.open {
		mapping.AppenderClear(a.app)
	}
	a.close()
}

func (a *chunkAppender) close() {
	a.schema.destroy()
	if a.open {
		mapping.AppenderDestroy(&a.app)
		a.open = false
	}
}
