package ingest_test

import (
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// KeysGen moves on by two with a load that changes the schema (before its
// COMMIT and after: even once it is done), and stays with one that only
// adds rows.
func TestKeysGen(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	g0 := db.KeysGen()
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "a.jsonl", traceLine(nil, span{"s1", []attr{{"k", "v"}}})))
	g1 := db.KeysGen()
	if g1 <= g0 || g1%2 != 0 {
		t.Fatalf("after a load that made the table: %d, then %d", g0, g1)
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "b.jsonl", traceLine(nil, span{"s2", []attr{{"k", "w"}}})))
	if g := db.KeysGen(); g != g1 {
		t.Errorf("after a load of rows alone: %d, was %d", g, g1)
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "c.jsonl", traceLine(nil, span{"s3", []attr{{"k2", 1}}})))
	if g := db.KeysGen(); g <= g1 || g%2 != 0 {
		t.Errorf("after a load that added a column: %d, was %d", g, g1)
	}
}
