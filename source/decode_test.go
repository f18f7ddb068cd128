package source

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

func TestDecodeNDJSON(t *testing.T) {
	traces := readTestdata(t, "traces.jsonl")
	logLine := bytes.ReplaceAll(bytes.TrimSpace(readTestdata(t, "log.json")), []byte("\n"), nil)
	get := func(tr transforms.Transform) *shred.Batch { return shred.NewBatch(tr.Core()) }
	f := func(fixed transforms.Transform, data []byte, wantTr string, wantN, wantLine int) {
		t.Helper()
		tr, b, n, err := DecodeNDJSON(fixed, data, get)
		if wantLine > 0 {
			var le *LineError
			if !errors.As(err, &le) || le.Line != wantLine {
				t.Fatalf("error %v, want one at line %d", err, wantLine)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := ""
		if tr != nil {
			name = tr.Name()
		}
		if name != wantTr || n != wantN || (b != nil && b.Rows != n) {
			t.Fatalf("%q, %d records; want %q, %d", name, n, wantTr, wantN)
		}
	}
	f(nil, traces, "otlp-traces", 19, 0)
	f(transforms.Traces, traces, "otlp-traces", 19, 0)
	f(nil, append(append([]byte("\n{}\n\n"), traces...), "\n\n"...), "otlp-traces", 19, 0)
	f(nil, nil, "", 0, 0)
	f(nil, []byte("{}\n{}\n"), "", 0, 0)
	f(nil, append(append(bytes.Clone(traces), '\n'), logLine...), "", 0, bytes.Count(traces, []byte("\n"))+2)
	f(transforms.Logs, traces, "", 0, 1)
	f(nil, []byte("{}\n{\"resourceSpans\":[\n"), "", 0, 2)
	if GenericJSON != nil {
		// Other JSON objects go to none, as with shredduck ingest.
		f(nil, []byte("{\"a\":1}\n{\"a\":2,\"b\":\"x\"}\n"), GenericJSON.Name(), 2, 0)
		f(nil, append([]byte("{\"a\":1}\n"), traces...), "", 0, 2)
		f(GenericJSON, []byte("{\"a\":1}\n"), GenericJSON.Name(), 1, 0)
	} else {
		f(nil, []byte("{\"a\":1}\n"), "", 0, 1)
	}
	// Pretty-printed requests, as ingest reads them.
	f(nil, readTestdata(t, "trace.json"), "otlp-traces", 2, 0)
}

func TestDecodeOTLP(t *testing.T) {
	logsPB := readTestdata(t, "logs.pb")
	f := func(tr transforms.Transform, fm Format, data []byte, wantN int, wantErr error) {
		t.Helper()
		b := shred.NewBatch(tr.Core())
		n, err := AppendOTLP(tr, fm, data, b)
		if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if n != wantN || b.Rows != wantN {
			t.Fatalf("%d records, %d rows; want %d", n, b.Rows, wantN)
		}
	}
	f(transforms.Logs, FormatProto, logsPB, 81, nil)
	f(transforms.Traces, FormatProto, logsPB, 0, transforms.ErrWrongSignal)
	f(transforms.Metrics, FormatProto, logsPB, 0, transforms.ErrWrongSignal)
	f(transforms.Traces, FormatJSON, readTestdata(t, "log.json"), 0, transforms.ErrWrongSignal)
	f(transforms.Traces, FormatProto, nil, 0, nil)
	f(transforms.Traces, FormatJSON, []byte("{}"), 0, nil)
}

// testdata holds OTLP fixtures shared with serve's tests.
const testdata = "../testdata/otlp/otlp2parquet"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecode: the one decode every door and source uses takes a batch
// from the pool under the limits, gives it back on an error and when no
// record is left to store, and reports rejected records.
func TestDecode(t *testing.T) {
	pool := NewBatchPool(0)
	logsPB := readTestdata(t, "logs.pb")
	d, err := Decode(pool, Request{Format: FormatProto, Tr: transforms.Logs, Data: logsPB}, shred.Limits{})
	if err != nil || d.Batch == nil || d.Records != 81 || d.Batch.Rows != 81 || d.Tr != transforms.Logs {
		t.Fatalf("logs.pb: %+v, %v; want 81 records in a batch", d, err)
	}
	d.Release()
	if d.Batch != nil {
		t.Error("Release left the batch")
	}
	if _, err := Decode(pool, Request{Format: FormatProto, Tr: transforms.Logs, Data: logsPB}, shred.Limits{MaxRows: 10}); !errors.Is(err, shred.ErrTooManyRows) || !IsLimit(err) {
		t.Errorf("81 records under MaxRows 10: %v, want ErrTooManyRows", err)
	}
	if _, err := Decode(pool, Request{Format: FormatProto, Tr: transforms.Traces, Data: logsPB}, shred.Limits{}); !errors.Is(err, transforms.ErrWrongSignal) {
		t.Errorf("logs as traces: %v, want ErrWrongSignal", err)
	}
	for _, req := range []Request{{Format: FormatProto, Tr: transforms.Traces}, {Format: FormatJSON, Tr: transforms.Traces, Data: []byte("{}")}, {NDJSON: true, Data: []byte("{}\n")}} {
		if d, err := Decode(pool, req, shred.Limits{}); err != nil || d.Batch != nil || d.Records != 0 {
			t.Errorf("empty request %+v: %+v, %v; want no batch", req, d, err)
		}
	}
	d, err = Decode(pool, Request{NDJSON: true, Data: readTestdata(t, "traces.jsonl")}, shred.Limits{})
	if err != nil || d.Tr != transforms.Traces || d.Records != 19 {
		t.Fatalf("traces.jsonl: %+v, %v; want 19 spans", d, err)
	}
	d.Release()
}
