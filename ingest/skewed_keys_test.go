package ingest_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// writeSkewedKeys writes n spans, 100 per OTLP/JSON request line, each with
// 10 attributes drawn by a Zipf law from keys keys whose type (int, bool,
// string) follows the key, and a sparse resource key per request.
func writeSkewedKeys(t *testing.T, path string, n, keys int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, uint64(keys-1))
	const per = 100
	for req := 0; req*per < n; req++ {
		fmt.Fprintf(w, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc%d"}},{"key":"res.k%d","value":{"stringValue":"v"}}]},"scopeSpans":[{"spans":[`, req%7, r.IntN(1000))
		for i := range per {
			if i > 0 {
				w.WriteByte(',')
			}
			id := req*per + i + 1
			fmt.Fprintf(w, `{"traceId":"%032x","spanId":"%016x","name":"op%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[`,
				id, id, i%5, 1700000000000000000+int64(id), 1700000000000100000+int64(id))
			for a := range 10 {
				if a > 0 {
					w.WriteByte(',')
				}
				switch k := z.Uint64(); k % 3 {
				case 0:
					fmt.Fprintf(w, `{"key":"k%d","value":{"intValue":"%d"}}`, k, r.IntN(1000))
				case 1:
					fmt.Fprintf(w, `{"key":"k%d","value":{"boolValue":%v}}`, k, r.IntN(2) == 0)
				default:
					fmt.Fprintf(w, `{"key":"k%d","value":{"stringValue":"s%d"}}`, k, r.IntN(100))
				}
			}
			w.WriteString(`]}`)
		}
		w.WriteString("]}]}]}\n")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// DuckDB 1.5.6 failed this bulk load with "INTERNAL Error: Row group prev
// allocated size is larger than currently allocated size" (in
// PhysicalInsert::Combine) and committed nothing; DuckDB 2.0 loads it.
func TestSkewedKeyMixLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("200k spans")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "skewed.ndjson")
	writeSkewedKeys(t, in, 200000, 20000)
	db, err := ingest.Open(filepath.Join(dir, "skewed.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, _ := os.Stat(in)
	if _, err := db.Load(t.Context(), []ingest.Input{{Name: in, Size: st.Size()}}, ingest.Options{MemoryLimit: "256MB"}); err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, db, "otel_traces"); n != 200000 {
		t.Errorf("%d spans, want 200000", n)
	}
}
