package sqlpolicy

import (
	"fmt"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// sizeSQL is a DuckDB expression of the size of the value of column ref (a
// positional reference, cast as selectExpr casts it): its bytes for text
// and blobs, its text's bytes for nested values, 40 for the rest.
func sizeSQL(col Column, ref string) string {
	expr := selectExpr(col, ref)
	if col.Cast != CastNone {
		return "coalesce(strlen(" + expr + "), 0)"
	}
	t := duckdb.TYPE_INVALID
	if col.Info != nil {
		t = col.Info.InternalType()
	}
	switch t {
	case duckdb.TYPE_VARCHAR:
		return "coalesce(strlen(" + expr + "), 0)"
	case duckdb.TYPE_BLOB, duckdb.TYPE_BIT:
		return "coalesce(octet_length(" + expr + "), 0)"
	case duckdb.TYPE_INVALID, duckdb.TYPE_LIST, duckdb.TYPE_ARRAY, duckdb.TYPE_STRUCT, duckdb.TYPE_MAP,
		duckdb.TYPE_UNION, duckdb.TYPE_ENUM:
		return "coalesce(strlen(CAST(" + expr + " AS VARCHAR)), 0)"
	}
	return "40"
}

// selectExpr selects column ref as the driver can scan it.
func selectExpr(col Column, ref string) string {
	switch col.Cast {
	case CastRawJSON, CastText:
		return ref + "::VARCHAR"
	case CastVariant, CastNestedJSON:
		return ref + "::JSON::VARCHAR"
	}
	return ref
}

// wrapQuery selects the columns of query by position, cast where needed,
// with the row limit and the byte limit (maxBytes, over the sizes of
// sizeSQL): rows past the byte limit come as NULLs with the last column,
// shredduck_over, true. The window is a streaming one (no ORDER BY or
// PARTITION BY), so the query's order is kept and nothing waits for the
// whole result. The result is prepared as one statement again, so text
// that closes the parenthesis early cannot add a statement.
func wrapQuery(query string, cols []Column, limit int, maxBytes int64) string {
	query = trimQuery(query)
	var inner, sizes, mid, outer strings.Builder
	for i, col := range cols {
		ref := "#" + strconv.Itoa(i+1)
		name := "shredduck_c" + strconv.Itoa(i+1)
		if i > 0 {
			sizes.WriteString(" + ")
		}
		fmt.Fprintf(&inner, "%s AS %s, ", selectExpr(col, ref), name)
		sizes.WriteString(sizeSQL(col, ref))
		fmt.Fprintf(&mid, "%s, ", name)
		fmt.Fprintf(&outer, "CASE WHEN shredduck_over THEN NULL ELSE %s END, ", name)
	}
	return fmt.Sprintf("SELECT %sshredduck_over FROM (\n"+
		"SELECT %ssum(shredduck_size) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) > %d AS shredduck_over FROM (\n"+
		"SELECT %s%s AS shredduck_size FROM (\n%s\n) LIMIT %d))",
		outer.String(), mid.String(), maxBytes, inner.String(), sizes.String(), query, limit)
}

// trimQuery drops the trailing semicolons of query: a trailing semicolon
// is fine alone but not inside parentheses.
func trimQuery(query string) string {
	return strings.TrimRightFunc(query, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// limitQuery selects every column of query, at most limit rows; like
// wrapQuery, it is prepared as one statement.
func limitQuery(query string, limit int) string {
	return "SELECT * FROM (\n" + trimQuery(query) + "\n) LIMIT " + strconv.Itoa(limit)
}
