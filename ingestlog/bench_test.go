package ingestlog

import (
	"context"
	"testing"
)

// BenchmarkAppend: 16 goroutines appending 16 KiB records (an OTLP request
// of ~80 spans), sharing group-committed fsyncs; loaded segments released
// as they fill, as the loader does.
func BenchmarkAppend(b *testing.B) {
	l, _, err := Open(Options{Dir: b.TempDir(), SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := make([]byte, 16<<10)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	b.SetParallelism(8) // 8 × GOMAXPROCS senders
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := l.Append(context.Background(), rec)
			if err != nil {
				b.Error(err)
				return
			}
			if l.Size() > 64<<20 {
				l.Release(p)
			}
		}
	})
}
