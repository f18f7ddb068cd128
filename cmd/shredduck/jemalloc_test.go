package main

import "testing"

func TestTuneAllocator(t *testing.T) {
	before, ok := allocatorDecay()
	if !ok {
		t.Skip("DuckDB is not linked with jemalloc here")
	}
	t.Logf("decay before: %d ms", before)
	set := func(string) (string, bool) { return "dirty_decay_ms:5000", true }
	if tuneAllocator(set, true) {
		t.Fatal("tuned the allocator although DUCKDB_JE_MALLOC_CONF is set")
	}
	if purgeRefused() {
		t.Fatal("madvise(MADV_DONTNEED) refused although DUCKDB_JE_MALLOC_CONF is set")
	}
	unset := func(string) (string, bool) { return "", false }
	if !tuneAllocator(unset, false) {
		t.Fatal("the allocator's decay was not set")
	}
	if purgeRefused() {
		t.Fatal("madvise(MADV_DONTNEED) refused for a command that does not keep pages")
	}
	if !tuneAllocator(unset, true) {
		t.Fatal("the allocator's decay was not set")
	}
	if !purgeRefused() {
		t.Fatal("madvise(MADV_DONTNEED) still hands pages back after tuning")
	}
	if ms, _ := allocatorDecay(); ms != allocatorDecayMs {
		t.Fatalf("decay %d ms after tuning, want %d", ms, allocatorDecayMs)
	}
}
