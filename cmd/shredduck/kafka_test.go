package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --kafka-topics names the three signals' topics, in order.
func TestServeKafkaTopicsUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "k.duckdb")
	code, stderr := serveCmd(t, "--db", db, "--kafka-brokers", "127.0.0.1:1", "--kafka-topics", "a,b")
	if code != exitUsage || !strings.Contains(stderr, "want three topics") {
		t.Fatalf("exit %d, stderr %q; want usage error about three topics", code, stderr)
	}
	code, stderr = serveCmd(t, "--db", db, "--kafka-brokers", "127.0.0.1:1", "--kafka-topics", "a,a,")
	if code != exitError || !strings.Contains(stderr, "two signals") {
		t.Fatalf("exit %d, stderr %q; want an error about a topic given twice", code, stderr)
	}
}
