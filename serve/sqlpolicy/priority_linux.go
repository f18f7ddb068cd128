package sqlpolicy

import (
	"runtime"
	"syscall"
)

// queryNice is how much nicer than the process a thread running a query
// is. Ingest and queries share the cores; 10 steps down the scheduler
// gives a busy query about a tenth of what a busy ingest thread gets when
// they compete, and all of an idle machine.
const queryNice = 10

// lowerPriority moves the calling goroutine onto a thread of its own,
// queryNice below the rest (DuckDB runs a query on the calling thread). The goroutine
// must end without unlocking: the thread then ends with it, and no other
// goroutine runs at its priority.
func lowerPriority() {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid) // 20 - nice
	if err != nil {
		return
	}
	syscall.Setpriority(syscall.PRIO_PROCESS, tid, min(20-p+queryNice, 19)) // best effort
}
