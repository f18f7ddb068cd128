package pgwire

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// pgType is the PostgreSQL type a column is sent as.
type pgType struct {
	oid  uint32
	elem uint32 // for arrays, the element's type
	size int16  // pg_type.typlen: -1 for variable sizes
}

var (
	typeBool        = pgType{oid: pgtype.BoolOID, size: 1}
	typeInt2        = pgType{oid: pgtype.Int2OID, size: 2}
	typeInt4        = pgType{oid: pgtype.Int4OID, size: 4}
	typeInt8        = pgType{oid: pgtype.Int8OID, size: 8}
	typeFloat4      = pgType{oid: pgtype.Float4OID, size: 4}
	typeFloat8      = pgType{oid: pgtype.Float8OID, size: 8}
	typeNumeric     = pgType{oid: pgtype.NumericOID, size: -1}
	typeText        = pgType{oid: pgtype.TextOID, size: -1}
	typeJSON        = pgType{oid: pgtype.JSONOID, size: -1}
	typeBytea       = pgType{oid: pgtype.ByteaOID, size: -1}
	typeUUID        = pgType{oid: pgtype.UUIDOID, size: 16}
	typeDate        = pgType{oid: pgtype.DateOID, size: 4}
	typeTime        = pgType{oid: pgtype.TimeOID, size: 8}
	typeTimetz      = pgType{oid: pgtype.TimetzOID, size: 12}
	typeTimestamp   = pgType{oid: pgtype.TimestampOID, size: 8}
	typeTimestamptz = pgType{oid: pgtype.TimestamptzOID, size: 8}
	typeInterval    = pgType{oid: pgtype.IntervalOID, size: 16}
)

// arrayOIDs are the array types of the list elements sent as arrays
// (sqlpolicy.Query.NestedJSON sends the other lists as JSON).
var arrayOIDs = map[uint32]uint32{
	pgtype.BoolOID: pgtype.BoolArrayOID, pgtype.Int2OID: pgtype.Int2ArrayOID, pgtype.Int4OID: pgtype.Int4ArrayOID,
	pgtype.Int8OID: pgtype.Int8ArrayOID, pgtype.Float4OID: pgtype.Float4ArrayOID, pgtype.Float8OID: pgtype.Float8ArrayOID,
	pgtype.TextOID: pgtype.TextArrayOID,
}

// scalarTypes map DuckDB's types to PostgreSQL's. Unsigned integers take
// the next wider type; those without one, numeric.
var scalarTypes = map[duckdb.Type]pgType{
	duckdb.TYPE_BOOLEAN:      typeBool,
	duckdb.TYPE_TINYINT:      typeInt2,
	duckdb.TYPE_SMALLINT:     typeInt2,
	duckdb.TYPE_INTEGER:      typeInt4,
	duckdb.TYPE_BIGINT:       typeInt8,
	duckdb.TYPE_UTINYINT:     typeInt2,
	duckdb.TYPE_USMALLINT:    typeInt4,
	duckdb.TYPE_UINTEGER:     typeInt8,
	duckdb.TYPE_UBIGINT:      typeNumeric,
	duckdb.TYPE_HUGEINT:      typeNumeric,
	duckdb.TYPE_UHUGEINT:     typeNumeric,
	duckdb.TYPE_BIGNUM:       typeNumeric,
	duckdb.TYPE_DECIMAL:      typeNumeric,
	duckdb.TYPE_FLOAT:        typeFloat4,
	duckdb.TYPE_DOUBLE:       typeFloat8,
	duckdb.TYPE_VARCHAR:      typeText,
	duckdb.TYPE_ENUM:         typeText,
	duckdb.TYPE_BLOB:         typeBytea,
	duckdb.TYPE_UUID:         typeUUID,
	duckdb.TYPE_DATE:         typeDate,
	duckdb.TYPE_TIME:         typeTime,
	duckdb.TYPE_TIME_TZ:      typeTimetz,
	duckdb.TYPE_TIMESTAMP:    typeTimestamp,
	duckdb.TYPE_TIMESTAMP_S:  typeTimestamp,
	duckdb.TYPE_TIMESTAMP_MS: typeTimestamp,
	duckdb.TYPE_TIMESTAMP_NS: typeTimestamp,
	duckdb.TYPE_TIMESTAMP_TZ: typeTimestamptz,
	duckdb.TYPE_INTERVAL:     typeInterval,
}

// columnType is the PostgreSQL type of a result column: JSON for JSON,
// VARIANT and nested values, arrays for lists of numbers, booleans and
// text, text for what has no counterpart (BIT, TIME_NS, GEOMETRY).
func columnType(c sqlpolicy.Column) pgType {
	switch c.Cast {
	case sqlpolicy.CastRawJSON, sqlpolicy.CastVariant, sqlpolicy.CastNestedJSON:
		return typeJSON
	case sqlpolicy.CastText:
		return typeText
	}
	if c.Info == nil {
		return typeText
	}
	return infoType(c.Info)
}

func infoType(info duckdb.TypeInfo) pgType {
	if info.Alias() == "JSON" {
		return typeJSON
	}
	t := info.InternalType()
	if p, ok := scalarTypes[t]; ok {
		return p
	}
	if t == duckdb.TYPE_LIST || t == duckdb.TYPE_ARRAY {
		var child duckdb.TypeInfo
		switch d := info.Details().(type) {
		case *duckdb.ListDetails:
			child = d.Child
		case *duckdb.ArrayDetails:
			child = d.Child
		}
		if child != nil {
			e := infoType(child)
			if a, ok := arrayOIDs[e.oid]; ok {
				return pgType{oid: a, elem: e.oid, size: -1}
			}
		}
		return typeJSON
	}
	return typeText
}

// paramType is the PostgreSQL type announced for a parameter DuckDB
// expects as t: text when DuckDB cannot tell (SELECT $1), as PostgreSQL
// types an unknown parameter; DuckDB casts the text.
// castNames are DuckDB's names of the types a client may declare for a
// parameter DuckDB cannot type (conn.prepare casts it).
var castNames = map[uint32]string{
	pgtype.BoolOID: "BOOLEAN", pgtype.Int2OID: "SMALLINT", pgtype.Int4OID: "INTEGER", pgtype.Int8OID: "BIGINT",
	pgtype.Float4OID: "REAL", pgtype.Float8OID: "DOUBLE", pgtype.NumericOID: "DOUBLE",
	pgtype.TextOID: "VARCHAR", pgtype.VarcharOID: "VARCHAR", pgtype.BPCharOID: "VARCHAR", pgtype.NameOID: "VARCHAR",
	pgtype.ByteaOID: "BLOB", pgtype.DateOID: "DATE", pgtype.TimeOID: "TIME", pgtype.TimestampOID: "TIMESTAMP",
	pgtype.TimestamptzOID: "TIMESTAMPTZ", pgtype.IntervalOID: "INTERVAL", pgtype.UUIDOID: "UUID", pgtype.JSONOID: "JSON",
}

// castOIDs are the types of casts a parameter may be written with
// ($1::INT), by DuckDB's names and their aliases.
var castOIDs = func() map[string]uint32 {
	m := map[string]uint32{"INT": pgtype.Int4OID, "INT4": pgtype.Int4OID, "INT8": pgtype.Int8OID, "INT2": pgtype.Int2OID,
		"FLOAT8": pgtype.Float8OID, "FLOAT4": pgtype.Float4OID, "FLOAT": pgtype.Float4OID, "BOOL": pgtype.BoolOID, "TEXT": pgtype.TextOID,
		"STRING": pgtype.TextOID, "TIMESTAMP_US": pgtype.TimestampOID}
	for oid, name := range castNames {
		if oid != pgtype.NumericOID && oid != pgtype.BPCharOID && oid != pgtype.NameOID {
			m[name] = oid
		}
	}
	return m
}()

func paramType(t duckdb.Type) uint32 {
	p, ok := scalarTypes[t]
	if !ok {
		return pgtype.TextOID
	}
	return p.oid
}

// Text formats, as PostgreSQL writes them (DateStyle ISO, IntervalStyle
// postgres); timestamps carry microseconds, PostgreSQL's precision.
const (
	dateLayout      = "2006-01-02"
	timeLayout      = "15:04:05.999999"
	timestampLayout = "2006-01-02 15:04:05.999999"
)

// appendText appends v, a value as the driver scanned it, in the text
// format of t.
func appendText(dst []byte, t pgType, v any) []byte {
	switch x := v.(type) {
	case bool:
		if x {
			return append(dst, 't')
		}
		return append(dst, 'f')
	case int8:
		return strconv.AppendInt(dst, int64(x), 10)
	case int16:
		return strconv.AppendInt(dst, int64(x), 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case *big.Int:
		return x.Append(dst, 10)
	case float32:
		return appendFloat(dst, float64(x), 32)
	case float64:
		return appendFloat(dst, x, 64)
	case duckdb.Decimal:
		return append(dst, x.String()...)
	case string:
		return append(dst, x...)
	case []byte:
		if t.oid == pgtype.UUIDOID && len(x) == 16 {
			return appendUUID(dst, x)
		}
		dst = append(dst, `\x`...)
		return hex.AppendEncode(dst, x)
	case duckdb.UUID:
		return appendUUID(dst, x[:])
	case *duckdb.UUID:
		return appendUUID(dst, x[:])
	case time.Time:
		switch t.oid {
		case pgtype.DateOID:
			return x.AppendFormat(dst, dateLayout)
		case pgtype.TimeOID:
			return x.AppendFormat(dst, timeLayout)
		case pgtype.TimetzOID:
			return x.AppendFormat(dst, timeLayout+"-07:00")
		case pgtype.TimestamptzOID:
			return append(x.UTC().AppendFormat(dst, timestampLayout), "+00"...)
		}
		return x.UTC().AppendFormat(dst, timestampLayout)
	case duckdb.Interval:
		return appendInterval(dst, x)
	case []any:
		return appendArray(dst, pgType{oid: t.elem}, x)
	case fmt.Stringer:
		return append(dst, x.String()...)
	}
	return fmt.Append(dst, v)
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendUUID(dst []byte, b []byte) []byte {
	dst = hex.AppendEncode(dst, b[0:4])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[4:6])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[6:8])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, b[8:10])
	dst = append(dst, '-')
	return hex.AppendEncode(dst, b[10:16])
}

// appendInterval writes PostgreSQL's default interval style:
// "1 year 2 mons 3 days 04:05:06.789".
func appendInterval(dst []byte, iv duckdb.Interval) []byte {
	start := len(dst)
	unit := func(n int64, one, many string) {
		if n == 0 {
			return
		}
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendInt(dst, n, 10)
		if n == 1 || n == -1 {
			dst = append(dst, one...)
		} else {
			dst = append(dst, many...)
		}
	}
	unit(int64(iv.Months/12), " year", " years")
	unit(int64(iv.Months%12), " mon", " mons")
	unit(int64(iv.Days), " day", " days")
	if iv.Micros != 0 || len(dst) == start {
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		us := iv.Micros
		if us < 0 {
			dst = append(dst, '-')
			us = -us
		}
		h, m, s, frac := us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000
		dst = fmt.Appendf(dst, "%02d:%02d:%02d", h, m, s)
		if frac != 0 {
			dst = append(dst, strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")...)
		}
	}
	return dst
}

// appendArray writes a PostgreSQL array literal: {1,2,NULL}, elements
// quoted where the syntax needs it.
func appendArray(dst []byte, elem pgType, vals []any) []byte {
	dst = append(dst, '{')
	var tmp []byte
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ',')
		}
		if v == nil {
			dst = append(dst, "NULL"...)
			continue
		}
		tmp = appendText(tmp[:0], elem, v)
		if !needsQuotes(tmp) {
			dst = append(dst, tmp...)
			continue
		}
		dst = append(dst, '"')
		for _, c := range tmp {
			if c == '"' || c == '\\' {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

func needsQuotes(s []byte) bool {
	if len(s) == 0 || strings.EqualFold(string(s), "NULL") {
		return true
	}
	for _, c := range s {
		switch c {
		case '{', '}', ',', '"', '\\', ' ', '\t', '\n', '\r', '\v', '\f':
			return true
		}
	}
	return false
}

// typeMap transcodes between text and binary formats. A Map caches plans
// and is not safe for concurrent use: one per connection.
func newTypeMap() *pgtype.Map { return pgtype.NewMap() }

// binaryOK reports whether a column of type t can be sent in binary.
func binaryOK(m *pgtype.Map, t pgType) bool {
	if t.oid == pgtype.TextOID || t.oid == pgtype.JSONOID || t.oid == pgtype.ByteaOID {
		return true
	}
	_, ok := m.TypeForOID(t.oid)
	return ok && t.oid != pgtype.TimetzOID
}

// appendBinary appends v in t's binary format: its text, decoded and
// encoded again by pgtype, so that both formats carry the same value.
func appendBinary(m *pgtype.Map, dst []byte, t pgType, v any) ([]byte, error) {
	switch t.oid {
	case pgtype.TextOID, pgtype.JSONOID: // the binary format is the text
		return appendText(dst, t, v), nil
	case pgtype.ByteaOID:
		if b, ok := v.([]byte); ok {
			return append(dst, b...), nil
		}
	}
	text := appendText(nil, t, v)
	var val any
	if err := m.Scan(t.oid, pgtype.TextFormatCode, text, &val); err != nil {
		return nil, fmt.Errorf("cannot send %q as binary OID %d: %w", text, t.oid, err)
	}
	out, err := m.Encode(t.oid, pgtype.BinaryFormatCode, val, dst)
	if err != nil {
		return nil, fmt.Errorf("cannot send %q as binary OID %d: %w", text, t.oid, err)
	}
	return out, nil
}

// paramValue decodes a parameter sent in format (0 text, 1 binary) as
// type oid into a value DuckDB binds: text stays text (DuckDB casts it to
// the parameter's type), binary is decoded by pgtype.
func paramValue(m *pgtype.Map, oid uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	if format == pgtype.TextFormatCode {
		return string(src), nil
	}
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.JSONOID, pgtype.NameOID, pgtype.BPCharOID, 0:
		return string(src), nil
	case pgtype.ByteaOID:
		return append([]byte(nil), src...), nil
	}
	if _, ok := m.TypeForOID(oid); !ok {
		return nil, fmt.Errorf("cannot decode a binary parameter of type OID %d; send it as text", oid)
	}
	var v any
	if err := m.Scan(oid, pgtype.BinaryFormatCode, src, &v); err != nil {
		return nil, fmt.Errorf("cannot decode a binary parameter of type OID %d: %w", oid, err)
	}
	switch x := v.(type) {
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case [16]byte:
		return string(appendUUID(nil, x[:])), nil
	case pgtype.Numeric:
		b, err := x.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case time.Time, int64, float64, bool, string:
		return x, nil
	}
	return nil, fmt.Errorf("cannot bind a binary parameter of type OID %d (%T); send it as text", oid, v)
}
