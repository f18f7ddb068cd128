//go:build linux && cgo

package main

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

// shredduck_keep_pages, once set, refuses the libc calls that hand pages
// back to the kernel: DuckDB purges every jemalloc arena and trims glibc's
// heap each time its buffer pool has evicted 1/16 of --memory-limit, and
// its next appends fault those pages in again (docs/SERVE.md, Memory).
// The Go runtime makes its own system calls and is not affected.
static volatile bool shredduck_keep_pages;

// madvise replaces libc's for the C code linked in (jemalloc purges
// through it, and DuckDB's block allocator when it is on). jemalloc handles a refused purge: the pages stay
// with it, not marked zeroed, and are reused.
int madvise(void *addr, size_t len, int advice) {
	if (shredduck_keep_pages && (advice == MADV_DONTNEED || advice == MADV_FREE)) {
		errno = EAGAIN;
		return -1;
	}
	return (int)syscall(SYS_madvise, addr, len, advice);
}

// malloc_trim replaces libc's for DuckDB, its only caller.
int malloc_trim(size_t pad) {
	if (shredduck_keep_pages) return 0;
	static int (*real)(size_t);
	if (real == NULL) real = (int (*)(size_t))dlsym(RTLD_NEXT, "malloc_trim");
	return real != NULL ? real(pad) : 0;
}

static void shredduck_set_keep_pages(bool on) { shredduck_keep_pages = on; }

// shredduck_purge_refused reports whether an anonymous page keeps its
// contents through madvise(MADV_DONTNEED) now.
static int shredduck_purge_refused(void) {
	long size = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) return -1;
	p[0] = 'k';
	int rc = madvise(p, size, MADV_DONTNEED);
	int kept = rc != 0 && p[0] == 'k';
	munmap(p, size);
	return kept;
}

// DuckDB's Linux builds link jemalloc under this prefix; weak, so that a
// build without it links and tuneAllocator does nothing.
extern int duckdb_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

static int shredduck_has_jemalloc(void) { return duckdb_je_mallctl != NULL; }

// shredduck_set_decay sets the dirty and muzzy decay of arenas made from
// now on and of every arena that exists; it returns how many settings took.
static int shredduck_set_decay(ssize_t ms) {
	int n = 0;
	if (duckdb_je_mallctl("arenas.dirty_decay_ms", NULL, NULL, &ms, sizeof(ms)) == 0) n++;
	if (duckdb_je_mallctl("arenas.muzzy_decay_ms", NULL, NULL, &ms, sizeof(ms)) == 0) n++;
	unsigned narenas = 0;
	size_t len = sizeof(narenas);
	if (duckdb_je_mallctl("arenas.narenas", &narenas, &len, NULL, 0) != 0) return n;
	char name[64];
	for (unsigned i = 0; i < narenas; i++) {
		snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", i);
		duckdb_je_mallctl(name, NULL, NULL, &ms, sizeof(ms));
		snprintf(name, sizeof(name), "arena.%u.muzzy_decay_ms", i);
		duckdb_je_mallctl(name, NULL, NULL, &ms, sizeof(ms));
	}
	return n;
}

static ssize_t shredduck_decay(void) {
	ssize_t ms = 0;
	size_t len = sizeof(ms);
	if (duckdb_je_mallctl("arenas.dirty_decay_ms", &ms, &len, NULL, 0) != 0) return -2;
	return ms;
}
*/
import "C"

// tuneAllocator stops DuckDB's allocator from handing idle pages back to
// the kernel on a timer and, with keepPages, when DuckDB purges, unless
// $DUCKDB_JE_MALLOC_CONF configures it. It reports whether it did.
func tuneAllocator(lookup func(string) (string, bool), keepPages bool) bool {
	_, configured := lookup("DUCKDB_JE_MALLOC_CONF")
	tune := !configured && C.shredduck_has_jemalloc() != 0
	C.shredduck_set_keep_pages(C.bool(tune && keepPages))
	if !tune {
		return false
	}
	return C.shredduck_set_decay(C.ssize_t(allocatorDecayMs)) == 2
}

// purgeRefused reports whether madvise keeps a page's contents now, as it
// does once tuneAllocator has run.
func purgeRefused() bool { return C.shredduck_purge_refused() == 1 }

// allocatorDecay returns the decay of DuckDB's allocator's new arenas in
// milliseconds, and false without jemalloc.
func allocatorDecay() (int64, bool) {
	if C.shredduck_has_jemalloc() == 0 {
		return 0, false
	}
	ms := C.shredduck_decay()
	return int64(ms), ms != -2
}
