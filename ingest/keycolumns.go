package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// KeyColumn is an attribute key that reads as a column of its table
// without being one, or without holding all its values: an overflowed key
// (Expr reads it from the overflow maps or the JSON overflow column), a
// promoted one (Promoted: Expr coalesces its column with the values that
// went to the overflow before it had one), or the stray values of a key
// with a stored column (Stray: the companion column "<column>~stray",
// VARCHAR, the text of the values of the kinds its column does not take,
// which went to the overflow under the key; docs/SCHEMA.md, 5.6).
type KeyColumn struct {
	Table    string
	Name     string // the column name it reads as
	Level    shred.Level
	Key      string
	Type     string // DuckDB type, as the catalog records it
	Expr     string // SQL over the table's columns, of that type
	Promoted bool
	Stray    bool
}

// StraySuffix ends the name of the column a key's stray values read as,
// after its stored column's name: "http.status_code~stray".
const StraySuffix = shred.StraySuffix

// Queryer is what KeyColumns needs of a connection or a database.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// KeyColumns returns the keys of table (every table when table is "")
// that read as columns through an expression (see KeyColumn), in catalog
// order. It needs only the catalog, so it works on a read-only database.
//
// A database without the catalog has no such keys; one written before
// keys could be promoted (shredduck_columns without promoted, as a file
// opened read-only keeps it) has no promoted keys.
func KeyColumns(ctx context.Context, q Queryer, table string) ([]KeyColumn, error) {
	return keyColumns(ctx, q, "(? = '' OR c.table_name = ?)", table, table)
}

// KeyColumnsNamed is KeyColumns for the keys of the tables among tables
// whose column names are among names, both compared ignoring case, as
// DuckDB compares identifiers (a name ending in StraySuffix also names
// its key's column). It reads only those keys' rows of the
// catalog: a query that names a few of thousands of keys does not pay for
// the others.
func KeyColumnsNamed(ctx context.Context, q Queryer, tables, names []string) ([]KeyColumn, error) {
	if len(tables) == 0 || len(names) == 0 {
		return nil, nil
	}
	in := func(list []string) string {
		quoted := make([]string, len(list))
		for i, s := range list {
			quoted[i] = shred.QuoteString(strings.ToLower(s))
		}
		return "(" + strings.Join(quoted, ", ") + ")"
	}
	names = names[:len(names):len(names)] // appended to: not into the caller's array
	for _, n := range names {             // a companion of strays is read with its key's row
		if len(n) > len(StraySuffix) && strings.EqualFold(n[len(n)-len(StraySuffix):], StraySuffix) {
			names = append(names, n[:len(n)-len(StraySuffix)])
		}
	}
	return keyColumns(ctx, q, "lower(c.table_name) IN "+in(tables)+" AND lower(c.column_name) IN "+in(names))
}

func keyColumns(ctx context.Context, q Queryer, where string, args ...any) ([]KeyColumn, error) {
	catalog, promoted, strays, err := keyCatalog(ctx, q)
	if err != nil || !catalog {
		return nil, err
	}
	promotedExpr, straysExpr := "false", "false"
	if promoted {
		promotedExpr = "c.promoted IS NOT NULL"
	}
	if strays {
		straysExpr = "coalesce(c.strays, 0) > 0"
	}
	rows, err := q.QueryContext(ctx, `SELECT c.table_name, t.transform, c.column_name, c.level, c.key, c.type, c.overflow, `+promotedExpr+`, `+straysExpr+`
		FROM shredduck_columns c JOIN shredduck_tables t USING (table_name)
		WHERE (c.overflow OR `+promotedExpr+` OR `+straysExpr+`) AND `+where+`
		ORDER BY c.table_name, c.first_seen, c.rowid`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []KeyColumn
	type found struct {
		kc             KeyColumn
		ov             string
		overflow, hasS bool
	}
	var keys []found
	for rows.Next() {
		var kc KeyColumn
		var tr, level string
		var overflow, hasStrays bool
		if err := rows.Scan(&kc.Table, &tr, &kc.Name, &level, &kc.Key, &kc.Type, &overflow, &kc.Promoted, &hasStrays); err != nil {
			return nil, err
		}
		var ok bool
		if kc.Level, ok = shred.ParseLevel(level); !ok {
			return nil, fmt.Errorf("catalog of %s: unknown level %q", kc.Table, level)
		}
		t, err := transforms.Lookup(tr)
		if err != nil {
			continue // a transform this release does not know: nothing to read it with
		}
		ov := t.Overflow()[kc.Level]
		if overflow && kc.Name == ov {
			continue // overflowed by an earlier release: only inside the JSON column
		}
		if shred.KindFromSQL(kc.Type) == shred.Null {
			continue
		}
		keys = append(keys, found{kc, ov, overflow, hasStrays && !overflow})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// The maps are added to a table with their first value: read only
	// those it has.
	have := map[string]map[string]bool{}
	for _, f := range keys {
		kc := f.kc
		if have[kc.Table] == nil {
			if have[kc.Table], err = tableColumns(ctx, q, kc.Table); err != nil {
				return nil, err
			}
		}
		kind := shred.KindFromSQL(kc.Type)
		if f.overflow || kc.Promoted {
			kc.Expr = overflowExpr(f.ov, kc.Key, kind, have[kc.Table])
			if kc.Promoted {
				kc.Expr = "coalesce(" + shred.QuoteIdent(kc.Name) + ", " + kc.Expr + ")"
			}
			out = append(out, kc)
		}
		if name := kc.Name + StraySuffix; f.hasS && !have[kc.Table][strings.ToLower(name)] {
			out = append(out, KeyColumn{Table: kc.Table, Name: name, Level: kc.Level, Key: kc.Key, Type: "VARCHAR",
				Expr: strayExpr(f.ov, kc.Key, kind, have[kc.Table]), Stray: true})
		}
	}
	return out, nil
}

// strayExpr reads the stray values of key, whose stored column is of kind
// col, from the overflow of the level whose JSON overflow column is ov, as
// text: from the maps of the kinds col does not take (shred.Widen; for a
// DOUBLE column, the integers beyond ±2^53) that the table has (have: its lower-cased column names), rendered as shred
// renders them in a VARCHAR column, else from the JSON column.
func strayExpr(ov, key string, col shred.Kind, have map[string]bool) string {
	k := shred.QuoteString(key)
	var parts []string
	for _, mk := range shred.MapKinds {
		name := shred.MapColumnName(ov, mk)
		exact := col == shred.Double && mk == shred.Int64 // a DOUBLE column takes the integers within ±2^53
		if (shred.Widen(col, mk) == col && !exact) || !have[strings.ToLower(name)] {
			continue
		}
		x := shred.QuoteIdent(name) + "[" + k + "]"
		switch {
		case exact:
			x = fmt.Sprintf("CASE WHEN %s NOT BETWEEN %d AND %d THEN CAST(%s AS VARCHAR) END", x, -shred.MaxExactInt, shred.MaxExactInt, x)
		case mk == shred.String:
		case mk == shred.Double:
			x = widenUsing(x, shred.Double, shred.String)
		default:
			x = "CAST(" + x + " AS VARCHAR)"
		}
		parts = append(parts, x)
	}
	path := shred.QuoteString(`$."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`)
	parts = append(parts, "("+shred.QuoteIdent(ov)+" ->> "+path+")")
	if len(parts) == 1 {
		return parts[0]
	}
	return "coalesce(" + strings.Join(parts, ", ") + ")"
}

// keyCatalog reports whether the database has the catalog tables
// KeyColumns reads, and whether shredduck_columns has promoted and strays
// (a file of an earlier release opened read-only may lack them).
func keyCatalog(ctx context.Context, q Queryer) (catalog, promoted, strays bool, err error) {
	rows, err := q.QueryContext(ctx, `SELECT count(DISTINCT table_name),
		count(*) FILTER (WHERE table_name = 'shredduck_columns' AND column_name = 'promoted'),
		count(*) FILTER (WHERE table_name = 'shredduck_columns' AND column_name = 'strays')
		FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main'
		AND table_name IN ('shredduck_columns', 'shredduck_tables')`)
	if err != nil {
		return false, false, false, err
	}
	defer rows.Close()
	var tables, prom, str int
	if rows.Next() {
		if err := rows.Scan(&tables, &prom, &str); err != nil {
			return false, false, false, err
		}
	}
	return tables == 2, prom > 0, str > 0, rows.Err()
}

// overflowExpr reads key from the overflow of the level whose JSON
// overflow column is ov, as kind: from the maps of the kinds that widen to
// it (shred.Widen) that the table has (have: its lower-cased column
// names), rendered as shred would render the value in a column of that
// kind, else from the JSON column.
func overflowExpr(ov, key string, kind shred.Kind, have map[string]bool) string {
	k := shred.QuoteString(key)
	typ := shred.ScalarType(kind).SQL()
	m := func(mk shred.Kind, as func(string) string) string {
		name := shred.MapColumnName(ov, mk)
		if !have[strings.ToLower(name)] {
			return ""
		}
		return as(shred.QuoteIdent(name) + "[" + k + "]")
	}
	plain := func(x string) string { return x }
	cast := func(to string) func(string) string {
		return func(x string) string { return "CAST(" + x + " AS " + to + ")" }
	}
	j := shred.QuoteIdent(ov)
	path := shred.QuoteString(`$."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`)
	text := "(" + j + " ->> " + path + ")"
	first := func(parts ...string) string {
		var ps []string
		for _, p := range parts {
			if p != "" {
				ps = append(ps, p)
			}
		}
		switch len(ps) {
		case 0:
			return "CAST(NULL AS " + typ + ")"
		case 1:
			return ps[0]
		}
		return "coalesce(" + strings.Join(ps, ", ") + ")"
	}
	switch kind {
	case shred.String:
		return first(m(shred.String, plain), m(shred.Int64, cast("VARCHAR")),
			m(shred.Double, func(x string) string { return widenUsing(x, shred.Double, shred.String) }),
			m(shred.Bool, cast("VARCHAR")), text)
	case shred.Int64, shred.Bool:
		return first(m(kind, plain))
	case shred.Double:
		return first(m(shred.Double, plain), m(shred.Int64, cast("DOUBLE")))
	case shred.JSON:
		return "(" + j + " -> " + path + ")"
	case shred.Blob:
		return "from_base64(" + text + ")"
	}
	return "CAST((" + j + " -> " + path + ") AS " + typ + ")" // lists, TIMESTAMPTZ
}

// KeysGen is the generation of what KeyColumns reads on db: the catalog's
// rows of the overflowed, promoted and stray keys, and the tables and
// their columns. A commit that may change them moves it on by one just
// before its COMMIT and by one just after, whether the COMMIT succeeds or
// not, so that it is odd while such a commit is under way. A reader that
// reads the same even generation before its transaction takes its
// snapshot and again after sees the catalog of that generation, and may
// use what it read of it at that generation before (keyview.Cache).
// Only this DB's writers move it: a database another process writes is
// not covered (DuckDB lets only one process open a file for writing).
func (db *DB) KeysGen() int64 { return db.keysGen.Load() }
