package ingest

import (
	"strconv"

	"github.com/shredduck/shredduck/shred"
)

// The SQL side of the text forms (shred.AppendText): when a column is
// widened (widenStatements), the values already stored are rewritten with
// these expressions, so that they read exactly as the same
// values widened inside a batch. DuckDB's own casts agree with AppendText
// for BOOLEAN, BIGINT and JSON to VARCHAR and need no expression; the
// others do not:
//
//   - DOUBLE: the cast writes 1 as 1.0;
//   - TIMESTAMPTZ: the cast renders in the session time zone, as
//     2014-12-31 23:00:00+00;
//   - lists: to_json writes doubles and timestamps in other forms;
//   - BLOB: the cast escapes bytes; the text form is base64.
//
// TestWidenSQLMatchesGo checks each expression against AppendText.

// widenUsing returns the expression that rewrites col (a quoted column, or
// an expression of kind from) into kind to, or "" when DuckDB's cast does.
func widenUsing(col string, from, to shred.Kind) string {
	switch {
	case from == shred.Blob:
		return "base64(" + col + ")"
	case to != shred.String && to != shred.JSON:
		return "" // BIGINT to DOUBLE, "NULL"[] to a list: exact casts
	case from == shred.Double:
		return doubleText(col)
	case from == shred.TimestampTZ:
		return timestampText(col)
	case from.IsList():
		return listText(col, from.Elem())
	}
	return ""
}

// doubleText renders a DOUBLE as appendFloat does: an integral value
// within ±2^53 as the integer, anything else as DuckDB's cast.
func doubleText(x string) string {
	max := strconv.Itoa(shred.MaxExactInt)
	return "(CASE WHEN isfinite(" + x + ") AND " + x + " = trunc(" + x + ") AND abs(" + x + ") <= " + max +
		" THEN CAST(CAST(" + x + " AS BIGINT) AS VARCHAR) ELSE CAST(" + x + " AS VARCHAR) END)"
}

// timestampText renders a TIMESTAMPTZ as shred.AppendTimestamp does:
// YYYY-MM-DDTHH:MM:SS[.f]Z in UTC, whatever the session's time zone, with
// the microseconds' trailing zeros (and a zero fraction) left out.
func timestampText(x string) string {
	u := "(" + x + " AT TIME ZONE 'UTC')"
	us := "(microsecond(" + u + ") % 1000000)"
	return "(strftime(" + u + ", '%Y-%m-%dT%H:%M:%S') || CASE WHEN " + us + " = 0 THEN '' ELSE '.' || rtrim(lpad(CAST(" + us +
		" AS VARCHAR), 6, '0'), '0') END || 'Z')"
}

// listText renders a list as compact JSON with the elements in the form
// of shred's appendElemJSON.
func listText(x string, elem shred.Kind) string {
	var e string
	switch elem {
	case shred.Double:
		e = doubleText("x")
	case shred.String:
		e = "CAST(to_json(x) AS VARCHAR)"
	case shred.TimestampTZ:
		e = `'"' || ` + timestampText("x") + ` || '"'`
	default: // Null, Bool, Int64
		e = "CAST(x AS VARCHAR)"
	}
	return "('[' || array_to_string(list_transform(" + x + ", lambda x: coalesce(" + e + ", 'null')), ',') || ']')"
}
