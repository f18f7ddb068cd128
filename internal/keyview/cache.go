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
}

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
