package ingestlog

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SIGKILL at random points while 8 goroutines append (mid-write,
// mid-fsync, mid-roll): after each kill the log opens, cuts at most a torn
// tail, and holds every record an Append had acknowledged, at its
// position, with its bytes; appends then go on after it.
func TestCrashAppend(t *testing.T) {
	if dir := os.Getenv("INGESTLOG_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	acked := map[Position]string{}
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashAppend$")
		cmd.Env = append(os.Environ(), "INGESTLOG_CRASH_CHILD="+dir, fmt.Sprintf("INGESTLOG_ROUND=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		kill := time.AfterFunc(time.Duration(50+rand.IntN(250))*time.Millisecond, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "ack" {
				p, _ := strconv.ParseUint(f[1], 10, 64)
				acked[Position(p)] = f[2]
			}
		}
		cmd.Wait()
		kill.Stop()
		l, _, err := Open(Options{Dir: dir, SegmentBytes: 4096})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, _ := readAll(t, l, l.First())
		l.Close()
		for p, want := range acked {
			if string(got[p]) != want {
				t.Fatalf("round %d: acknowledged record at %d is %q, want %q", round, p, got[p], want)
			}
		}
	}
	t.Logf("%d records acknowledged over %d kills", len(acked), rounds)
	if len(acked) < 100 {
		t.Fatalf("only %d records acknowledged in %d rounds: the kills came too early to test anything", len(acked), rounds)
	}
}

func crashChild(dir string) {
	l, _, err := Open(Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				b := fmt.Sprintf("r%s-g%d-i%d-%s", os.Getenv("INGESTLOG_ROUND"), g, i, strings.Repeat("x", i%300))
				p, err := l.Append(context.Background(), []byte(b))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(w, "ack %d %s\n", p, b)
				w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
