//go:build linux && cgo

package main

/*
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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
// the kernel on a timer, unless $DUCKDB_JE_MALLOC_CONF configures it. It
// reports whether it did.
func tuneAllocator(lookup func(string) (string, bool)) bool {
	if _, ok := lookup("DUCKDB_JE_MALLOC_CONF"); ok || C.shredduck_has_jemalloc() == 0 {
		return false
	}
	return C.shredduck_set_decay(C.ssize_t(allocatorDecayMs)) == 2
}

// allocatorDecay returns the decay of DuckDB's allocator's new arenas in
// milliseconds, and false without jemalloc.
func allocatorDecay() (int64, bool) {
	if C.shredduck_has_jemalloc() == 0 {
		return 0, false
	}
	ms := C.shredduck_decay()
	return int64(ms), ms != -2
}
