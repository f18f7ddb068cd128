package keyview

import (
	"context"
	"fmt"
	"sync"

	"github.com/shredduck/shredduck/ingest"
)

// Cache keeps the key catalog of one database (ingest.KeyColumns of
// every table) between queries, for as long as its generation
// (ingest.DB.KeysGen) stays the same: reading it costs a few scans of
// duckdb_columns() per query, and it changes only with the schema. It
// is safe for concurrent use.
type Cache struct {
	db *ingest.DB
	mu sync.Mutex
	// keys are the catalog's keys at generation gen; valid when ok.
	keys []ingest.KeyColumn
	gen  int64
	ok   bool
	// parsed are the references of recent query texts (parseRefs), in
	// the order they were kept: a text's references depend on nothing
	// else, and Jaeger's and dashboards' statements come back with only
	// their parameters changed.
	parsed map[string]parsed
	order  []string
	// dbName is the connections' default database, once read.
	dbName string
}

// parsed is what parseRefs gave for a query.
type parsed struct {
	refs Refs
	ok   bool
}

// Bounds of Cache.parsed: the texts kept, and the longest kept.
const (
	maxParsed    = 256
	maxParsedLen = 64 << 10
)

// NewCache returns an empty Cache of db's key catalog.
func NewCache(db *ingest.DB) *Cache { return &Cache{db: db} }

// Gen is the generation to read before the query's transaction begins,
// and to pass to CreateCached.
func (k *Cache) Gen() int64 { return k.db.KeysGen() }

// fenceSQL reads the database's catalog, so that the transaction has
// taken its snapshot of the database once it has run.
const fenceSQL = "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = 'shredduck_columns'"

// keyColumns returns the catalog's keys of tables (the keys named by names
// among them, at least) as the transaction on c sees them. gen is
// k.Gen() read before the transaction began: when it is even and the
// same after the transaction has taken its snapshot, no commit that
// changes the catalog was under way in between, and the catalog the
// transaction sees is that of gen, which the cache holds or is given.
// Otherwise it reads only the keys named, and keeps nothing.
func (k *Cache) keyColumns(ctx context.Context, c Conn, gen int64, tables, names []string) ([]ingest.KeyColumn, error) {
	if k == nil {
		return ingest.KeyColumnsNamed(ctx, c, tables, names)
	}
	var n int64
	if err := queryRow(ctx, c, fenceSQL, nil, &n); err != nil {
		return nil, fmt.Errorf("cannot read the catalog: %w", err)
	}
	if gen%2 != 0 || k.Gen() != gen {
		return ingest.KeyColumnsNamed(ctx, c, tables, names)
	}
	k.mu.Lock()
	if k.ok && k.gen == gen {
		keys := k.keys
		k.mu.Unlock()
		return keys, nil
	}
	k.mu.Unlock()
	keys, err := ingest.KeyColumns(ctx, c, "")
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if !k.ok || gen > k.gen {
		k.keys, k.gen, k.ok = keys, gen, true
	}
	k.mu.Unlock()
	return keys, nil
}

// refs returns the references of query (parseRefs), from the cache when
// it holds them. The Refs returned are shared: callers only read them.
func (k *Cache) refs(ctx context.Context, c Conn, query string) (Refs, bool, error) {
	if k == nil || len(query) > maxParsedLen {
		return parseRefs(ctx, c, query)
	}
	k.mu.Lock()
	p, hit := k.parsed[query]
	k.mu.Unlock()
	if hit {
		return p.refs, p.ok, nil
	}
	refs, ok, err := parseRefs(ctx, c, query)
	if err != nil {
		return refs, ok, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, hit := k.parsed[query]; !hit {
		if k.parsed == nil {
			k.parsed = make(map[string]parsed, maxParsed)
		}
		if len(k.order) >= maxParsed {
			delete(k.parsed, k.order[0])
			k.order = k.order[1:]
		}
		k.parsed[query] = parsed{refs, ok}
		k.order = append(k.order, query)
	}
	return refs, ok, nil
}

// parseRefs parses query (json_serialize_sql, which does not run it) and
// returns its references; ok is false when DuckDB cannot parse it.
func parseRefs(ctx context.Context, c Conn, query string) (Refs, bool, error) {
	var tree string
	if err := queryRow(ctx, c, "SELECT CAST(json_serialize_sql(CAST(? AS VARCHAR)) AS VARCHAR)", []any{query}, &tree); err != nil {
		return Refs{}, false, fmt.Errorf("cannot parse the query: %w", err)
	}
	return ParseTree(tree)
}

// database returns the connections' default database, which the views
// name their tables in; every connection of a database has the same.
func (k *Cache) database(ctx context.Context, c Conn) (string, error) {
	if k != nil {
		k.mu.Lock()
		name := k.dbName
		k.mu.Unlock()
		if name != "" {
			return name, nil
		}
	}
	var name string
	if err := queryRow(ctx, c, "SELECT current_database()", nil, &name); err != nil {
		return "", err
	}
	if k != nil {
		k.mu.Lock()
		k.dbName = name
		k.mu.Unlock()
	}
	return name, nil
}
