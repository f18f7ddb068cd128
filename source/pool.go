package source

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
	MaxPooledColumns = 2048
)

// A pool holds on to returned batches of up to keep bytes (all
// transforms') across garbage collections, which empty a sync.Pool: under
// load the loader's merged items (and the door's batches) were otherwise
// rebuilt, buffer by buffer, after every collection, which a third of the
// server's allocated bytes went to. The door's pool keeps DoorKeptBytes;
// the loader's, ItemsKeptBytes: a transaction's items (a row group of
// 2,048-row items, some 1-2 MB each) are live during every load anyway.
const (
	DoorKeptBytes  = 8 << 20
	ItemsKeptBytes = 32 << 20
)

// BatchPool recycles batches, and their column buffers, one pool per
// transform. Its zero value keeps nothing across garbage collections.
type BatchPool struct {
	keep  int
	mu    sync.Mutex
	bytes int      // the capacity of the kept batches
	pools sync.Map // transform name -> *trPool
}

// trPool holds a transform's kept batches, the rest in a sync.Pool.
type trPool struct {
	kept []keptBatch
	rest sync.Pool
}

// keptBatch is a kept batch and its capacity when put back (Capacity
// walks every column: taken once).
type keptBatch struct {
	b    *shred.Batch
	size int
}

// NewBatchPool returns a pool that keeps up to keep bytes of returned
// batches across garbage collections.
func NewBatchPool(keep int) *BatchPool { return &BatchPool{keep: keep} }

func (p *BatchPool) pool(tr transforms.Transform) *trPool {
	if v, ok := p.pools.Load(tr.Name()); ok {
		return v.(*trPool)
	}
	tp := &trPool{}
	tp.rest.New = func() any { return shred.NewBatch(tr.Core()) }
	v, _ := p.pools.LoadOrStore(tr.Name(), tp)
	return v.(*trPool)
}

// Get returns an empty batch for tr, without limits.
func (p *BatchPool) Get(tr transforms.Transform) *shred.Batch {
	tp := p.pool(tr)
	p.mu.Lock()
	if n := len(tp.kept); n > 0 {
		k := tp.kept[n-1]
		tp.kept[n-1] = keptBatch{}
		tp.kept = tp.kept[:n-1]
		p.bytes -= k.size
		p.mu.Unlock()
		return k.b
	}
	p.mu.Unlock()
	return tp.rest.Get().(*shred.Batch)
}

// Put returns a batch once nothing refers to its memory: after the
// committer's Submit has returned (not by its context ending).
func (p *BatchPool) Put(tr transforms.Transform, b *shred.Batch) {
	b.Reset()
	size := b.Capacity() // what it keeps: Reset dropped the columns of keys that did not come back
	if size > maxPooledBatch || b.SpareColumns() > MaxPooledColumns {
		return
	}
	tp := p.pool(tr)
	p.mu.Lock()
	if p.bytes+size <= p.keep {
		tp.kept = append(tp.kept, keptBatch{b, size})
		p.bytes += size
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	tp.rest.Put(b)
}
