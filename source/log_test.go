package source

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimitedLog(t *testing.T) {
	var buf bytes.Buffer
	l := NewLimitedLog(slog.New(slog.NewJSONHandler(&buf, nil)), 10*time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := 0; i < 5; i++ {
		l.Log(slog.LevelWarn, "a", "refused")
	}
	l.Log(slog.LevelWarn, "b", "refused")
	now = now.Add(11 * time.Second)
	l.Log(slog.LevelWarn, "a", "refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[2], `"suppressed":4`) {
		t.Errorf("third line %s does not report 4 suppressed", lines[2])
	}
}
