package ingestlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

func open(t *testing.T, opt Options) (*Log, Recovery) {
	t.Helper()
	l, rec, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rec
}

func payload(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("record %d;", i)), 1+i%7)
}

// readAll returns the synced records from pos on.
func readAll(t *testing.T, l *Log, pos Position) (map[Position][]byte, Position) {
	t.Helper()
	r := l.NewReader(pos)
	defer r.Close()
	out := map[Position][]byte{}
	for {
		p, b, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out, r.Pos()
		}
		out[p] = bytes.Clone(b)
	}
}

// Concurrent appends across many segments: every record reads back at the
// position its Append returned, in position order, and again after the
// log is opened anew, whose next record follows the last.
func TestAppendRead(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, Options{Dir: dir, SegmentBytes: 1000, Start: 500})
	var mu sync.Mutex
	want := map[Position][]byte{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				b := payload(w*1000 + i)
				p, err := l.Append(context.Background(), b)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if _, dup := want[p]; dup {
					t.Errorf("position %d twice", p)
				}
				want[p] = b
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	check := func(l *Log) Position {
		got, end := readAll(t, l, 500)
		if len(got) != len(want) {
			t.Fatalf("%d records read, %d appended", len(got), len(want))
		}
		for p, b := range want {
			if !bytes.Equal(got[p], b) {
				t.Fatalf("position %d: %q, want %q", p, got[p], b)
			}
		}
		if end != l.Durable() {
			t.Fatalf("reader ends at %d, durable %d", end, l.Durable())
		}
		return end
	}
	end := check(l)
	if n := len(l.segs); n < 10 {
		t.Fatalf("%d segments, want many", n)
	}
	l.Close()
	l2, rec := open(t, Options{Dir: dir, SegmentBytes: 1000})
	if rec.Cut != 0 || check(l2) != end {
		t.Fatalf("reopened: cut %d", rec.Cut)
	}
	p, err := l2.Append(context.Background(), []byte("next"))
	if err != nil || p != end {
		t.Fatalf("next record at %d, %v; want %d", p, err, end)
	}
}

// A crash mid-append leaves a torn tail: a cut frame header, a cut
// payload or bytes that fail the checksum. Open cuts exactly that, every
// whole record stays, and appends continue at the cut.
func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(f *os.File, size int64)
	}{
		{"header cut", func(f *os.File, size int64) { f.WriteAt([]byte{9, 0, 0}, size) }},
		{"payload cut", func(f *os.File, size int64) { f.WriteAt([]byte{100, 0, 0, 0, 1, 2, 3, 4, 'x', 'y'}, size) }},
		{"bad checksum", func(f *os.File, size int64) { f.WriteAt([]byte{2, 0, 0, 0, 1, 2, 3, 4, 'x', 'y'}, size) }},
		{"zeros", func(f *os.File, size int64) { f.WriteAt(make([]byte, 4096), size) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := open(t, Options{Dir: dir})
			var last Position
			for i := range 5 {
				var err error
				if last, err = l.Append(context.Background(), payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			end := l.Durable()
			l.Close()
			seg := l.segs[len(l.segs)-1]
			f, err := os.OpenFile(seg.path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.tear(f, seg.size)
			f.Close()
			l2, rec := open(t, Options{Dir: dir})
			if rec.Cut == 0 || rec.CutAt != end {
				t.Fatalf("recovery %+v, want a cut at %d", rec, end)
			}
			got, _ := readAll(t, l2, 0)
			if len(got) != 5 || !bytes.Equal(got[last], payload(4)) {
				t.Fatalf("%d records after the cut", len(got))
			}
			if p, err := l2.Append(context.Background(), []byte("after")); err != nil || p != end {
				t.Fatalf("append after the cut at %d, %v; want %d", p, err, end)
			}
		})
	}
}

// A record of a sealed segment that fails its checksum, or a segment cut
// short, is reported where it is, not read as data and not skipped.
func TestCorruptSegment(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, Options{Dir: dir, SegmentBytes: 200})
	for i := range 30 {
		if _, err := l.Append(context.Background(), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	s := l.segs[1]
	b, _ := os.ReadFile(s.path)
	b[headerSize+frameHeader+2] ^= 0xff
	os.WriteFile(s.path, b, 0o644)
	l2, _ := open(t, Options{Dir: dir, SegmentBytes: 200})
	r := l2.NewReader(0)
	defer r.Close()
	n := 0
	for {
		_, _, ok, err := r.Next()
		var ce *CorruptError
		if errors.As(err, &ce) {
			if ce.Pos != s.base || ce.Segment != s.path {
				t.Fatalf("corruption reported at %d in %s, want %d in %s", ce.Pos, ce.Segment, s.base, s.path)
			}
			break
		}
		if err != nil || !ok {
			t.Fatalf("read %d records without finding the corruption: %v", n, err)
		}
		n++
	}
	// Skipping the segment goes on at the next one's first record.
	next, lost, err := r.SkipSegment()
	if err != nil || next != l2.segs[2].base || lost != int64(next-s.base) {
		t.Fatalf("SkipSegment: %d, %d lost, %v", next, lost, err)
	}
	if p, _, ok, err := r.Next(); !ok || err != nil || p != next {
		t.Fatalf("after SkipSegment: %d %v %v", p, ok, err)
	}
	// A sealed segment cut short: the gap is reported.
	s2 := l2.segs[2]
	os.Truncate(s2.path, s2.size-3)
	l2.Close()
	l3, _ := open(t, Options{Dir: dir, SegmentBytes: 200})
	r3 := l3.NewReader(s2.base)
	defer r3.Close()
	err = nil
	for ok := true; ok && err == nil; {
		_, _, ok, err = r3.Next()
	}
	if !errors.As(err, new(*CorruptError)) {
		t.Fatalf("a segment cut short: %v, want a CorruptError", err)
	}
}

// The log holds at most MaxBytes: beyond, ErrFull at once; releasing the
// loaded segments makes room again, and the files go.
func TestFullAndRelease(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, Options{Dir: dir, SegmentBytes: 300, MaxBytes: 2000})
	var last Position
	for {
		p, err := l.Append(context.Background(), make([]byte, 50))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	if l.Size() > 2000 {
		t.Fatalf("log of %d bytes, bound 2000", l.Size())
	}
	files := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
		return len(m)
	}
	before := files()
	if err := l.Release(last); err != nil {
		t.Fatal(err)
	}
	if files() != 1 || before < 3 {
		t.Fatalf("%d segments before Release, %d after; want many, then 1", before, files())
	}
	if _, err := l.Append(context.Background(), make([]byte, 50)); err != nil {
		t.Fatalf("after Release: %v", err)
	}
	got, _ := readAll(t, l, last)
	if len(got) != 2 {
		t.Fatalf("%d records from the last loaded one on, want 2", len(got))
	}
	if _, err := l.NewReader(0).locate(); err == nil {
		t.Fatal("a released position reads")
	}
}

// A full disk mid-write: the append fails, the partial write is undone,
// and the next append (space again) lands right after the last good one.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, Options{Dir: dir})
	p0, _ := l.Append(context.Background(), []byte("first"))
	writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		n, _ := f.WriteAt(b[:len(b)/2], off)
		return n, syscall.ENOSPC
	}
	_, err := l.Append(context.Background(), []byte("this one does not fit"))
	writeAt = (*os.File).WriteAt
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	p2, err := l.Append(context.Background(), []byte("third"))
	if err != nil || p2 != p0+Position(frameHeader+len("first")) {
		t.Fatalf("append after the full disk at %d, %v", p2, err)
	}
	l.Close()
	l2, rec := open(t, Options{Dir: dir})
	got, _ := readAll(t, l2, 0)
	if rec.Cut != 0 || len(got) != 2 || string(got[p2]) != "third" {
		t.Fatalf("after reopening: cut %d, %d records", rec.Cut, len(got))
	}
}

// Wait returns when a record arrives, or with ctx's error.
func TestWait(t *testing.T) {
	l, _ := open(t, Options{Dir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty log: %v", err)
	}
	done := make(chan error)
	go func() { done <- l.Wait(context.Background(), 0) }()
	time.Sleep(10 * time.Millisecond)
	l.Append(context.Background(), []byte("x"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// AppendThen's hook runs before a reader sees the record, for concurrent
// appends and a reader that follows them; a failed write calls no hook.
func TestAppendThen(t *testing.T) {
	l, _ := open(t, Options{Dir: t.TempDir(), SegmentBytes: 2000})
	var hooked sync.Map
	const writers, each = 8, 40
	done := make(chan error, 1)
	go func() {
		r := l.NewReader(0)
		defer r.Close()
		for seen := 0; seen < writers*each; {
			p, _, ok, err := r.Next()
			if err != nil {
				done <- err
				return
			}
			if !ok {
				l.Wait(context.Background(), r.Pos())
				continue
			}
			if _, ok := hooked.Load(p); !ok {
				done <- fmt.Errorf("the reader saw position %d before its hook ran", p)
				return
			}
			seen++
		}
		done <- nil
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				calls := 0
				p, err := l.AppendThen(context.Background(), payload(w*1000+i), func(p, _ Position) {
					calls++
					hooked.Store(p, true)
				})
				if err != nil || calls != 1 {
					t.Errorf("append: %v, hook called %d times", err, calls)
				}
				if _, ok := hooked.Load(p); !ok {
					t.Errorf("the hook had another position than %d", p)
				}
			}
		})
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	writeAt = func(*os.File, []byte, int64) (int, error) { return 0, syscall.ENOSPC }
	defer func() { writeAt = (*os.File).WriteAt }()
	called := false
	if _, err := l.AppendThen(context.Background(), []byte("x"), func(Position, Position) { called = true }); err == nil || called {
		t.Fatalf("a failed write: %v, hook called %v", err, called)
	}
}

// A log of another database (it ends before the position the database
// has loaded) and a segment of a newer format are refused, naming them.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, Options{Dir: dir})
	l.Append(context.Background(), []byte("x"))
	l.Close()
	if _, _, err := Open(Options{Dir: dir, Start: 1000}); err == nil {
		t.Fatal("a log ending before the loaded position opens")
	}
	b, _ := os.ReadFile(l.segs[0].path)
	b[6] = 2
	os.WriteFile(l.segs[0].path, b, 0o644)
	if _, _, err := Open(Options{Dir: dir}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("version 2")) {
		t.Fatalf("a newer segment: %v", err)
	}
}
