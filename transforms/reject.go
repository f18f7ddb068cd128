package transforms

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shredduck/shredduck/shred"
)

// RejectedError reports the records of an export request that a decoder
// left out because they hold data no column can take (a span kind or
// status code outside its enum; in protobuf, text that is not UTF-8),
// while it appended the request's other records. AppendJSON and
// AppendProto return it with the count of rows they did append: the
// caller stores those and reports the rest as rejected (OTLP's partial
// success). Malformed requests still fail whole with another error.
type RejectedError struct {
	Records int    // records left out
	Noun    string // "span", "log record"
	First   string // the lowest-numbered rejected record and why
}

func (e *RejectedError) Error() string {
	noun := e.Noun
	if e.Records != 1 {
		noun += "s"
	}
	return fmt.Sprintf("%d %s rejected; first: %s", e.Records, noun, e.First)
}

// rejects tracks the records of one request that are left out. A decoder
// numbers the records of a request in order; when a record is rejected
// after it has touched the batch (an attribute that created or widened a
// column), the request is decoded a second time with the rejected records
// skipped, so that they leave no trace in column types.
type rejects struct {
	noun     string // one record, in messages: "span", "log record", …
	next     int    // number of the next record
	cur      int    // number of the record being decoded
	bad      []int  // records rejected, ascending
	skip     []int  // records to skip in the second pass, ascending
	skipAt   int    // skip[:skipAt] have been passed in this pass
	added    []int  // records added to bad in this pass, in order (for undo)
	first    string // why the lowest-numbered one was rejected
	firstRec int
	off      bool  // decoding records that are not stored: count nothing
	recOf    []int // the number of the record each row of this pass came from
}

// reset starts a request whose records are nouns.
func (r *rejects) reset(noun string) {
	r.noun, r.next, r.cur, r.off, r.skipAt = noun, 0, 0, false, 0
	r.bad, r.skip, r.first, r.recOf, r.added = r.bad[:0], r.skip[:0], "", r.recOf[:0], r.added[:0]
}

// begin numbers the record about to be decoded and reports whether it is
// to be skipped.
func (r *rejects) begin() (skip bool) {
	if r.off {
		return false
	}
	r.cur = r.next
	r.next++
	if r.skipAt < len(r.skip) && r.skip[r.skipAt] == r.cur {
		r.skipAt++
		return true
	}
	return false
}

// rejectsMark is the state of a rejects before some records, for undo.
type rejectsMark struct {
	next, firstRec, added int
	first                 string
}

func (r *rejects) mark() rejectsMark {
	return rejectsMark{next: r.next, firstRec: r.firstRec, added: len(r.added), first: r.first}
}

// undo forgets the records decoded since m, as if they had not been: the
// JSON decoder's for the data points of a metric's data that a later
// oneof field replaces (protobuf decodes such data with off set). Their
// numbers go to the records decoded next.
func (r *rejects) undo(m rejectsMark) {
	if r.off {
		return
	}
	for _, rec := range r.added[m.added:] {
		if i, found := slices.BinarySearch(r.bad, rec); found {
			r.bad = slices.Delete(r.bad, i, i+1)
		}
	}
	r.added = r.added[:m.added]
	r.next, r.first, r.firstRec = m.next, m.first, m.firstRec
	r.skipAt, _ = slices.BinarySearch(r.skip, m.next)
}

// reject leaves the current record out, for reason.
func (r *rejects) reject(reason error) {
	r.add(r.cur, reason)
}

func (r *rejects) add(rec int, reason error) {
	if r.off {
		return
	}
	if i, found := slices.BinarySearch(r.bad, rec); !found {
		r.bad = slices.Insert(r.bad, i, rec)
		r.added = append(r.added, rec)
	}
	if r.first == "" || rec < r.firstRec {
		r.first, r.firstRec = fmt.Sprintf("%s %d of the request: %v", r.noun, rec+1, reason), rec
	}
}

// rows notes that the current record appended n rows, for checkUTF8.
func (r *rejects) rows(n int) {
	if r.off {
		return
	}
	for range n {
		r.recOf = append(r.recOf, r.cur)
	}
}

// checkUTF8 rejects the records whose rows, from row start on, hold text
// that is not UTF-8, which DuckDB's VARCHAR cannot take. Protobuf decoders
// call it: unlike JSON, protobuf strings are not checked by pdata.
func (r *rejects) checkUTF8(b *shred.Batch, start int, core []shred.CoreColumn) {
	b.InvalidUTF8(start, core, func(row int, err error) {
		r.add(r.recOf[row-start], err)
	})
}

// passes runs pass, which decodes a request into b, until a pass rejects
// no further record: between passes the batch is rolled back and the
// rejected records are skipped, so that they leave no trace in it (an
// attribute of theirs that created or widened a column).
func (r *rejects) passes(b *shred.Batch, pass func() error) error {
	start := b.Rows
	for {
		before := len(r.bad)
		r.recOf = r.recOf[:0]
		if err := pass(); err != nil {
			return err
		}
		if len(r.bad) == before {
			return nil
		}
		b.Rollback(start)
		r.next, r.cur, r.skipAt, r.added = 0, 0, 0, r.added[:0]
		r.skip = append(r.skip[:0], r.bad...)
	}
}

// result is the error a decoder returns with the rows it appended.
func (r *rejects) result() error {
	if len(r.bad) == 0 {
		return nil
	}
	return &RejectedError{Records: len(r.bad), Noun: r.noun, First: r.first}
}

// maxTimeNS is the latest time a TIMESTAMP_NS column holds: DuckDB stores
// int64 nanoseconds (OTLP sends uint64 ones), the largest of which is
// DuckDB's infinity.
const maxTimeNS = math.MaxInt64 - 1

var maxTime = time.Unix(0, maxTimeNS).UTC()

// timeCheck keeps the first time of the record being decoded that no
// TIMESTAMP_NS column can hold (year 2262 on). Such a record is rejected,
// naming the field: stored, the value would be infinity or wrap to 1677
// or 1754, and make casts of the column fail for the whole table. 0, OTLP's "unset", is
// stored as NULL (shred.Column.AppendTime).
type timeCheck struct{ err error }

func (c *timeCheck) reset() { c.err = nil }

// check notes ns, the value of field.
func (c *timeCheck) check(ns uint64, field string) {
	if ns > maxTimeNS && c.err == nil {
		c.err = fmt.Errorf("field %s: %d ns is after %s, the latest time a TIMESTAMP_NS column holds", field, ns, maxTime.Format(time.RFC3339Nano))
	}
}
