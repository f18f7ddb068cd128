package keyview

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

// Conn is the one database connection a query runs on (*sql.Conn): the
// views are temporary objects of that connection, so it must not be a
// pool (*sql.DB), whose next statement may run on another connection.
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Views are the temporary views Create made on a connection; Drop removes
// them. The zero value and nil hold none.
type Views struct {
	c      Conn
	tables []string // as the catalog spells them
	macros []string // the clocks shadowed (clock.go)
}

// Create parses query (json_serialize_sql, which does not run it) and, for
// every table it references (see Refs.Tables) whose overflowed or promoted
// keys (ingest.KeyColumns) it names as columns, creates on c
//
//	CREATE OR REPLACE TEMP VIEW "table" AS SELECT * REPLACE (<promoted>),
//	    <overflowed> FROM "<database>"."main"."table"
//
// which shadows the table for the query's references without a catalog:
// an overflowed key reads as the column "key" (appended after the
// table's columns), a promoted one replaces its column in place with the
// column coalesced with the values from before its promotion. Only the
// keys named are in the view, so that binding it costs one column per key
// (docs/SPARSE.md). SELECT * therefore shows the overflowed keys only
// when the query also names them; the others stay in the maps.
//
// DuckDB keeps temporary objects in its in-memory temp catalog, so this
// works on a database opened read-only, after lock_configuration and in a
// READ ONLY transaction. Call it in the query's transaction: the views
// then match the catalog the query sees. Made outside, a key promoted
// between Create and the query (ALTER TABLE ADD COLUMN on another
// connection) would be in the view twice, and DuckDB binds the stored
// column, NULL in the rows from before the promotion. ROLLBACK drops the
// views; the caller must call Drop anyway before c serves another query,
// also when the query failed or was canceled. Create drops what it made
// if it fails.
//
// A query that calls now(), current_timestamp, get_current_timestamp() or
// transaction_timestamp() gets them as temporary macros returning the
// same instant as a UTC TIMESTAMP (clock.go), which compares with the time
// columns; Drop drops those too.
func Create(ctx context.Context, c Conn, query string) (*Views, error) {
	return create(ctx, c, query, nil, 0)
}

// CreateCached is Create with the catalog's keys read through cache
// (Cache.keyColumns) while the catalog stays as it was: gen is
// cache.Gen(), read before the transaction on c began.
func CreateCached(ctx context.Context, c Conn, query string, cache *Cache, gen int64) (*Views, error) {
	return create(ctx, c, query, cache, gen)
}

func create(ctx context.Context, c Conn, query string, cache *Cache, gen int64) (*Views, error) {
	refs, ok, err := cache.refs(ctx, c, query)
	if err != nil || !ok {
		return nil, err
	}
	v := &Views{c: c}
	if err := v.createClocks(ctx, refs); err != nil {
		return nil, errors.Join(err, v.Drop(context.WithoutCancel(ctx)))
	}
	if len(refs.Tables) == 0 || len(refs.Columns) == 0 {
		return v, nil
	}
	keys, err := cache.keyColumns(ctx, c, gen, setList(refs.Tables), setList(refs.Columns))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cannot read the catalog's keys: %w", err), v.Drop(context.WithoutCancel(ctx)))
	}
	plan := Plan(refs, keys)
	if len(plan) == 0 {
		return v, nil
	}
	database, err := cache.database(ctx, c)
	if err != nil {
		return nil, errors.Join(err, v.Drop(context.WithoutCancel(ctx)))
	}
	for _, p := range plan {
		if _, err := c.ExecContext(ctx, p.SQL(database)); err != nil {
			return nil, errors.Join(fmt.Errorf("cannot read the keys of %s as columns: %w", p.Table, err), v.Drop(context.WithoutCancel(ctx)))
		}
		v.tables = append(v.tables, p.Table)
	}
	return v, nil
}

// Tables returns the tables the views shadow.
func (v *Views) Tables() []string {
	if v == nil {
		return nil
	}
	return v.tables
}

// Drop drops the views. It is safe on nil and after an earlier Drop.
func (v *Views) Drop(ctx context.Context) error {
	if v == nil {
		return nil
	}
	var errs []error
	for _, t := range v.tables {
		if _, err := v.c.ExecContext(ctx, "DROP VIEW IF EXISTS temp.main."+shred.QuoteIdent(t)); err != nil {
			errs = append(errs, fmt.Errorf("cannot drop the temporary view %s: %w", t, err))
		}
	}
	v.tables = nil
	errs = append(errs, v.dropClocks(ctx))
	return errors.Join(errs...)
}

// View is the view of one table: the keys a query names.
type View struct {
	Table string
	Keys  []ingest.KeyColumn // in catalog order
}

// Plan returns the views a query with refs needs, by table name: the keys
// of the referenced tables whose names it references.
func Plan(refs Refs, keys []ingest.KeyColumn) []View {
	var out []View
	for _, k := range keys {
		if !refs.Tables[strings.ToLower(k.Table)] || !refs.Columns[strings.ToLower(k.Name)] {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Table != k.Table {
			out = append(out, View{Table: k.Table})
		}
		out[len(out)-1].Keys = append(out[len(out)-1].Keys, k)
	}
	slices.SortStableFunc(out, func(a, b View) int { return strings.Compare(a.Table, b.Table) })
	return out
}

// SQL is the statement that creates the view, reading the table of
// database: the table must be named with its catalog, or the view would
// read itself.
func (v View) SQL(database string) string {
	var b strings.Builder
	b.WriteString("CREATE OR REPLACE TEMP VIEW ")
	b.WriteString(shred.QuoteIdent(v.Table))
	b.WriteString(" AS SELECT *")
	var replace, add []string
	for _, k := range v.Keys {
		e := "CAST(" + k.Expr + " AS " + k.Type + ") AS " + shred.QuoteIdent(k.Name)
		if k.Promoted {
			replace = append(replace, e)
		} else {
			add = append(add, e)
		}
	}
	if len(replace) > 0 {
		b.WriteString(" REPLACE (" + strings.Join(replace, ", ") + ")")
	}
	for _, e := range add {
		b.WriteString(", " + e)
	}
	b.WriteString(" FROM " + shred.QuoteIdent(database) + ".main." + shred.QuoteIdent(v.Table))
	return b.String()
}

func queryRow(ctx context.Context, c Conn, query string, args []any, dest ...any) error {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

func setList(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
