package sqlpolicy

import (
	"syscall"
	"testing"
)

// A query's goroutine runs on a thread of its own at queryNice, and the
// thread ends with it: the goroutines after it run at the process's.
func TestLowerPriority(t *testing.T) {
	nice := func() int {
		// The system call returns 20 - nice.
		p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
		if err != nil {
			t.Fatal(err)
		}
		return 20 - p
	}
	base := nice()
	got := make(chan int)
	go func() {
		lowerPriority()
		got <- nice()
	}()
	if n, want := <-got, min(base+queryNice, 19); n != want {
		t.Fatalf("a query's thread at nice %d, want %d", n, want)
	}
	for range 50 {
		go func() { got <- nice() }()
		if n := <-got; n != base {
			t.Fatalf("a later goroutine's thread at nice %d, want %d", n, base)
		}
	}
}
