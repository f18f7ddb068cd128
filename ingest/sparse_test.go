package ingest_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

// sparseAttr renders attribute key k<i> with a value of a kind chosen by
// i: string, int, double or bool.
func sparseAttr(i, v int) string {
	var val string
	switch i % 4 {
	case 0:
		val = fmt.Sprintf(`{"stringValue": "s%d"}`, v)
	case 1:
		val = fmt.Sprintf(`{"intValue": "%d"}`, v)
	case 2:
		val = fmt.Sprintf(`{"doubleValue": %d.5}`, v)
	default:
		val = fmt.Sprintf(`{"boolValue": %t}`, v%2 == 0)
	}
	return fmt.Sprintf(`{"key": "k%d", "value": %s}`, i, val)
}

// TestSparseKeys: with the default density rule, keys that few records
// carry go to the typed overflow, dense ones get columns, a key that turns
// dense is promoted; every key's values read back exactly through its
// column name (KeyColumns), typed, the rows before a promotion included.
func TestSparseKeys(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	db.ColumnDensity = shred.DefaultDensity
	rng := rand.New(rand.NewPCG(1, 2))
	const spans, keys, perSpan = 3000, 2000, 10
	count := map[string]int{}
	var lines []string
	for s := range spans {
		attrs := []string{fmt.Sprintf(`{"key": "http.route", "value": {"stringValue": "/r%d"}}`, s%7)}
		seen := map[int]bool{}
		for len(seen) < perSpan {
			i := rng.IntN(keys)
			if !seen[i] {
				seen[i] = true
				attrs = append(attrs, sparseAttr(i, s))
				count[fmt.Sprintf("k%d", i)]++
			}
		}
		lines = append(lines, spanLine("s", `"attributes": [`+strings.Join(attrs, ", ")+`]`))
	}
	res := mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "sparse.jsonl", lines...))
	st := stats(t, res, "otel_traces")
	// The young table's budget (shred.DefaultYoung) goes to the first
	// keys seen; past it a sparse key may pass the threshold by chance, a
	// handful, not the column budget.
	if st.ColumnsAdded < 1 || st.ColumnsAdded > shred.DefaultYoung+6 || st.KeysOverflowed != len(count)+1-st.ColumnsAdded {
		t.Errorf("%+v: want http.route and at most %d sparse keys stored, the other keys overflowed", *st, shred.DefaultYoung+5)
	}
	countThrough := func(key string) int64 {
		return queryInt(t, db, "SELECT count("+keyExpr(t, db, key)+") FROM otel_traces")
	}
	// Every key, 400 at a time.
	kcs, err := ingest.KeyColumns(ctxFor(t), db.SQL, "otel_traces")
	if err != nil {
		t.Fatal(err)
	}
	if len(kcs) != st.KeysOverflowed {
		t.Fatalf("%d keys read through an expression, want %d", len(kcs), st.KeysOverflowed)
	}
	cat := catalog(t, db, "otel_traces")
	for key, n := range count {
		if c := cat["record\x00"+key]; !c.Overflow {
			if got := queryInt(t, db, "SELECT count("+shred.QuoteIdent(c.Column)+") FROM otel_traces"); got != int64(n) {
				t.Errorf("stored key %s: %d rows, want %d", key, got, n)
			}
		}
	}
	for len(kcs) > 0 {
		chunk := kcs[:min(400, len(kcs))]
		kcs = kcs[len(chunk):]
		var sel []string
		for _, kc := range chunk {
			sel = append(sel, "count("+kc.Expr+")")
		}
		got := queryStrings(t, db, "SELECT "+strings.Join(sel, ", ")+" FROM otel_traces")[0]
		for i, kc := range chunk {
			if got[i] != fmt.Sprint(count[kc.Key]) {
				t.Errorf("key %s: %s rows, want %d", kc.Key, got[i], count[kc.Key])
			}
		}
	}
	// Each kind reads as its type: k1 is an integer, k2 a double, k3 a bool.
	for key, typ := range map[string]string{"k0": "VARCHAR", "k1": "BIGINT", "k2": "DOUBLE", "k3": "BOOLEAN"} {
		if c := catalogEntry(t, db, "otel_traces", "record", key); c.Type != typ {
			t.Errorf("%s: %+v, want %s", key, c, typ)
		}
	}
	if got := queryStrings(t, db, `SELECT `+keyExpr(t, db, "k1")+`, `+keyExpr(t, db, "k2")+` FROM otel_traces WHERE `+keyExpr(t, db, "k1")+` IS NOT NULL ORDER BY 1 LIMIT 1`); len(got) != 1 {
		t.Errorf("typed read of k1, k2: %v", got)
	}

	// k5 turns dense: promoted, its earlier values still read.
	before := count["k5"]
	lines = lines[:0]
	for s := range 2000 {
		lines = append(lines, spanLine("p", `"attributes": [`+sparseAttr(5, s)+`]`))
	}
	res = mustLoad(t, db, ingest.Options{}, ndjson(t, filepath.Join(dir), "dense.jsonl", lines...))
	if st := stats(t, res, "otel_traces"); st.KeysPromoted != 1 {
		t.Errorf("%+v, want k5 promoted", *st)
	}
	if c := catalogEntry(t, db, "otel_traces", "record", "k5"); c.Overflow || c.Type != "BIGINT" || !c.Promoted {
		t.Errorf("k5 after promotion: %+v", c)
	}
	if n := queryInt(t, db, `SELECT count("k5") FROM otel_traces`); n != int64(before+2000) {
		t.Errorf("the column of k5 holds %d values, want all %d, the ones from before its promotion included", n, before+2000)
	}
	if n := countThrough("k5"); n != int64(before+2000) {
		t.Errorf("k5 reads %d values, want %d", n, before+2000)
	}
}

// keyExpr is how key k reads as a column of otel_traces: its KeyColumns
// expression, or its column.
func keyExpr(t *testing.T, db *ingest.DB, k string) string {
	kcs, err := ingest.KeyColumns(ctxFor(t), db.SQL, "otel_traces")
	if err != nil {
		t.Fatal(err)
	}
	for _, kc := range kcs {
		if kc.Key == k {
			return kc.Expr
		}
	}
	return shred.QuoteIdent(k)
}
