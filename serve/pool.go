package serve

import (
	"sync"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// A batch is kept for reuse only while its buffers' capacity and its
// attribute columns (those of keys it saw before included: a batch keeps
// them for the keys' return) stay under these caps. Without them, one
// request of 50,000 distinct keys left a pooled batch with 50,000 columns
// and their buffers for the life of the process.
const (
	maxPooledBatch   = 32 << 20
	maxPooledColumns = 2048
)

// batchPool recycles batches, and their column buffers, one pool per
// transform.
type batchPool struct {
	pools sync.Map // transform name -> *sync.Pool
}

func (p *batchPool) pool(tr transforms.Transform) *sync.Pool {
	if v, ok := p.pools.Load(tr.Name()); ok {
		return v.(*sync.Pool)
	}
	v, _ := p.pools.LoadOrStore(tr.Name(), &sync.Pool{New: func() any { return shred.NewBatch(tr.Core()) }})
	return v.(*sync.Pool)
}

// get returns an empty batch for tr.
func (p *batchPool) get(tr transforms.Transform) *shred.Batch {
	return p.pool(tr).Get().(*shred.Batch)
}

// put returns a batch once nothing refers to its memory: after the
// committer's Submit has returned (not by its context ending).
func (p *batchPool) put(tr transforms.Transform, b *shred.Batch) {
	if b.Capacity() > maxPooledBatch || b.SpareColumns() > maxPooledColumns {
		return
	}
	b.Reset()
	p.pool(tr).Put(b)
}
