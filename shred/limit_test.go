package shred

import (
	"errors"
	"strconv"
	"testing"
)

var limitCore = []CoreColumn{{Name: "name", Type: ScalarType(String)}}

func limitRow(b *Batch, name string) {
	b.Core[0].AppendString(name)
	b.EndRow()
}

func TestBatchMaxRows(t *testing.T) {
	b := NewBatch(limitCore)
	b.SetLimits(Limits{MaxRows: 3})
	for i := range 3 {
		limitRow(b, "r")
		if err := b.Err(); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	limitRow(b, "r")
	if err := b.Err(); !errors.Is(err, ErrTooManyRows) || err.Error() != "too many rows: more than 3" {
		t.Fatalf("a fourth row: %v", err)
	}
	if err := b.Finish(); !errors.Is(err, ErrTooManyRows) {
		t.Errorf("Finish after the limit: %v", err)
	}
	b.Reset()
	for range 10 {
		limitRow(b, "r")
	}
	if err := b.Err(); err != nil {
		t.Errorf("Reset keeps the limit: %v", err)
	}
}

// charger grants up to max bytes and records what it was asked.
type charger struct {
	max, granted int64
}

func (c *charger) charge(n int64) bool {
	if c.granted+n > c.max {
		return false
	}
	c.granted += n
	return true
}

// TestBatchSparseKeysLinear: a new key in every row would cost n² NULL
// slots if keys were padded (20,000 keys in as many rows: 3.2 GB); sparse
// columns keep the batch linear in its values, charged as it grows.
func TestBatchSparseKeysLinear(t *testing.T) {
	c := &charger{max: 64 << 20}
	b := NewBatch(limitCore)
	b.SetLimits(Limits{Charge: c.charge})
	const n = 20_000
	for i := range n {
		b.SetAttr(Record, []byte("key."+strconv.Itoa(i)), i, Value{Kind: String, Bytes: []byte("v")})
		limitRow(b, "r")
	}
	if err := b.Finish(); err != nil {
		t.Fatalf("20,000 keys in as many rows: %v (granted %d bytes)", err, c.granted)
	}
	if got := b.Bytes(); got > 4<<20 {
		t.Errorf("the batch holds %d bytes for %d one-value keys", got, n)
	}
	if c.granted > 24<<20 {
		t.Errorf("granted %d bytes, want about %d keys × %d", c.granted, n, dynColumnCost)
	}
	for _, d := range b.Dyn {
		if d.At == nil || d.Col.Len != 1 {
			t.Fatalf("key %s: %d values, sparse %v; want one value, sparse", d.Key, d.Col.Len, d.At != nil)
		}
	}
	// The same under a small charge: refused, and never more than granted.
	c = &charger{max: 1 << 20}
	b = NewBatch(limitCore)
	b.SetLimits(Limits{Charge: c.charge})
	for i := range n {
		b.SetAttr(Record, []byte("key."+strconv.Itoa(i)), i, Value{Kind: String, Bytes: []byte("v")})
		limitRow(b, "r")
		if b.Err() != nil {
			break
		}
	}
	if err := b.Err(); !errors.Is(err, ErrMemory) {
		t.Fatalf("under 1 MiB: %v", err)
	}
	if c.granted > c.max || b.Bytes() > int(c.max) {
		t.Errorf("granted %d, holds %d, of %d", c.granted, b.Bytes(), c.max)
	}
}

// TestBatchChargesFill: a value filled into many rows (a resource
// attribute) is charged before it is copied.
func TestBatchChargesFill(t *testing.T) {
	c := &charger{max: 1 << 20}
	b := NewBatch(limitCore)
	b.SetLimits(Limits{Charge: c.charge})
	for range 1000 {
		limitRow(b, "r")
	}
	big := make([]byte, 64<<10)
	b.FillAttr(Resource, []byte("big"), 0, b.Rows, Value{Kind: String, Bytes: big}) // 64 MiB
	if err := b.Err(); !errors.Is(err, ErrMemory) {
		t.Fatalf("a 64 KiB value in 1,000 rows under a 1 MiB charge: %v", err)
	}
	if got := b.Bytes(); got > 1<<20 {
		t.Errorf("the batch holds %d bytes", got)
	}
	if b.Reserve(1) {
		t.Error("Reserve grants after a refusal")
	}
}

// TestBatchChargesGrowth: rows are measured every few hundred, so that
// values the decoder copies from the input are charged too.
func TestBatchChargesGrowth(t *testing.T) {
	c := &charger{max: 1 << 30}
	b := NewBatch(limitCore)
	b.SetLimits(Limits{Charge: c.charge})
	name := string(make([]byte, 1000))
	for range 10_000 {
		limitRow(b, name)
	}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	if got, min := c.granted, int64(10_000*1000*9/10); got < min {
		t.Errorf("granted %d bytes for a batch of %d", got, b.Bytes())
	}
}

func TestBatchCapacity(t *testing.T) {
	b := NewBatch(limitCore)
	for i := range 100 {
		b.SetAttr(Record, []byte("k"+strconv.Itoa(i)), 0, Value{Kind: Int64, Int: 1})
	}
	limitRow(b, "r")
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	before := b.Capacity()
	b.Reset()
	if b.SpareColumns() != 100 || b.Capacity() != before {
		t.Errorf("after Reset: %d spare columns, capacity %d (before %d)", b.SpareColumns(), b.Capacity(), before)
	}
	// New keys take the columns of keys that did not come back, and a
	// reused column starts sparse.
	for r := range 1000 {
		b.SetAttr(Record, []byte("rare"+strconv.Itoa(r)), r, Value{Kind: Int64, Int: 1})
		limitRow(b, "r")
	}
	for _, d := range b.Dyn {
		if d.At == nil {
			t.Fatalf("%s: a reused column is padded", d.Key)
		}
	}
	b.Finish()
	b.Reset()
	// A batch keeps the columns of its last use only, however many keys
	// it saw before.
	for r := range 10 {
		b.SetAttr(Record, []byte("other"+strconv.Itoa(r)), r, Value{Kind: Int64, Int: 1})
		limitRow(b, "r")
	}
	b.Finish()
	b.Reset()
	if n := b.SpareColumns(); n != 10 {
		t.Errorf("after batches of 100, 1,000 and 10 keys: %d spare columns, want the last 10", n)
	}
}
