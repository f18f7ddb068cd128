package source

import (
	"strconv"
	"testing"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// TestBatchPoolCaps: a batch that grew attribute columns for thousands of
// keys is not kept for reuse.
func TestBatchPoolCaps(t *testing.T) {
	p := NewBatchPool(DoorKeptBytes)
	b := p.Get(transforms.Traces)
	for i := range MaxPooledColumns + 1 {
		b.SetAttr(shred.Record, []byte("key."+strconv.Itoa(i)), 0, shred.Value{Kind: shred.Int64, Int: 1})
	}
	transforms.Traces.AppendProto(b, readTestdata(t, "trace.pb"))
	p.Put(transforms.Traces, b)
	if again := p.Get(transforms.Traces); again == b || again.SpareColumns() > 0 {
		t.Errorf("a batch with %d attribute columns came back from the pool", b.SpareColumns())
	}
}

// TestBatchPoolBytes: the kept bytes go back to zero when every kept batch
// is taken again, however the batches' columns changed between uses (the
// count drifted up when a batch's size was taken before Reset dropped
// columns, until the pool kept nothing).
func TestBatchPoolBytes(t *testing.T) {
	p := NewBatchPool(DoorKeptBytes)
	b := p.Get(transforms.Traces)
	for round, keys := range []int{100, 10, 1} {
		for i := range keys {
			b.SetAttr(shred.Record, []byte("key."+strconv.Itoa(round*100+i)), 0, shred.Value{Kind: shred.String, Bytes: []byte("some value")})
		}
		transforms.Traces.AppendProto(b, readTestdata(t, "trace.pb"))
		p.Put(transforms.Traces, b)
		if p.bytes <= 0 {
			t.Fatalf("round %d: %d bytes kept after a put", round, p.bytes)
		}
		if b = p.Get(transforms.Traces); p.bytes != 0 {
			t.Fatalf("round %d: %d bytes counted with nothing kept", round, p.bytes)
		}
	}
}
