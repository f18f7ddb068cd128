package serve

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// FuzzOTLPHTTP sends random bodies with random content types and
// encodings to the OTLP/HTTP handler: it never panics, and answers 200
// with an empty response or an error status with a google.rpc.Status body
// in the response's content type.
//
//	go test -run '^$' -fuzz FuzzOTLPHTTP -fuzztime 30s ./serve/
func FuzzOTLPHTTP(f *testing.F) {
	db, err := ingest.Open(filepath.Join(f.TempDir(), "fuzz.duckdb"))
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(db, Config{MaxBody: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	h := srv.Handler()
	paths := []string{"/v1/traces", "/v1/logs", "/v1/metrics"}

	const pb, js = "application/x-protobuf", "application/json"
	seed := func(path uint8, ctype, enc string, body []byte) { f.Add(path, ctype, enc, body) }
	seed(0, pb, "", readTestdata(f, "trace.pb"))
	seed(0, js, "", readTestdata(f, "trace.json"))
	seed(1, js, "gzip", gzipBytes(f, readTestdata(f, "log.json")))
	seed(2, pb, "", readTestdata(f, "metrics_gauge.pb"))
	seed(2, js+"; charset=utf-8", "", readTestdata(f, "metrics_sum.json"))
	seed(1, pb, "", readTestdata(f, "metrics_gauge.pb"))
	seed(0, js, "", []byte("{}"))
	seed(0, pb, "", nil)
	seed(0, js, "gzip", []byte("\x1f\x8b\x08\x00garbage"))
	seed(1, "text/plain", "", []byte("hello"))
	seed(2, pb, "deflate", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	nul := tracesRequest("x")
	nul.Traces().ResourceSpans().At(0).Resource().Attributes().PutStr("a\x00b", "v")
	nulPB, _ := nul.MarshalProto()
	seed(0, pb, "", nulPB) // a NUL in an attribute key
	seed(0, js, "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","kind":"SPAN_KIND_SERVER","traceId":"AAECAwQFBgcICQoLDA0ODw=="}]}]}]}`))

	f.Fuzz(func(t *testing.T, path uint8, ctype, enc string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, paths[int(path)%len(paths)], bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		f, known := requestFormat(ctype)
		respCT := rec.Header().Get("Content-Type")
		switch rec.Code {
		case http.StatusOK:
			if !known || respCT != f.ContentType() {
				t.Fatalf("200 for Content-Type %q answered as %q", ctype, respCT)
			}
			if want := map[format]string{formatProto: "", formatJSON: "{}"}[f]; rec.Body.String() != want {
				t.Fatalf("200 with body %q", rec.Body.Bytes())
			}
			return
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("status %d: %q", rec.Code, rec.Body.Bytes())
		}
		rf := formatJSON
		if respCT == formatProto.ContentType() {
			rf = formatProto
		} else if respCT != formatJSON.ContentType() {
			t.Fatalf("error response Content-Type %q", respCT)
		}
		if known && rf != f {
			t.Fatalf("error for a %s request answered in %s", f, rf)
		}
		st, err := parseStatus(rf, rec.Body.Bytes())
		if err != nil {
			t.Fatalf("status %d body %q is not a Status: %v", rec.Code, rec.Body.Bytes(), err)
		}
		if st.Code == 0 || st.Message == "" {
			t.Fatalf("status %d with Status %v", rec.Code, st)
		}
	})
}
