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
