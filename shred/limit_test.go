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

// TestBatchChargesPadding: a key per row makes every attribute column
// padded with a NULL per row, n² slots for n rows; the batch asks for
// them before it pads, and stops.
func TestBatchChargesPadding(t *testing.T) {
	c := &charger{max: 8 << 20}
	b := NewBatch(limitCore)
	b.SetLimits(Limits{Charge: c.charge})
	rows := 0
	for i := range 20_000 {
		b.SetAttr(Record, []byte("key."+strconv.Itoa(i)), i, Value{Kind: String, Bytes: []byte("v")})
		limitRow(b, "r")
		rows++
		if b.Err() != nil {
			break
		}
	}
	if err := b.Err(); !errors.Is(err, ErrMemory) {
		t.Fatalf("20,000 keys in as many rows: %v (granted %d bytes)", err, c.granted)
	}
	if got := b.Bytes(); got > int(c.max) {
		t.Errorf("the batch holds %d bytes, more than the %d granted", got, c.max)
	}
	if c.granted > c.max {
		t.Errorf("granted %d bytes of %d", c.granted, c.max)
	}
	if rows > 2000 {
		t.Errorf("stopped after %d rows; 8 MiB of padding is some 1,400", rows)
	}
	if err := b.Finish(); !errors.Is(err, ErrMemory) {
		t.Errorf("Finish after the refusal: %v", err)
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
	before := b.Capacity()
	b.Reset()
	if b.SpareColumns() != 100 || b.Capacity() != before {
		t.Errorf("after Reset: %d spare columns, capacity %d (before %d)", b.SpareColumns(), b.Capacity(), before)
	}
}
