package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func genGH(t *testing.T, n int, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	st, err := generateGHArchive(&buf, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	if st.records != n || st.bytes != int64(buf.Len()) {
		t.Fatalf("stats %+v for %d events, %d bytes", st, n, buf.Len())
	}
	return buf.Bytes()
}

func TestGHArchiveDeterministic(t *testing.T) {
	a, b := genGH(t, 500, 7), genGH(t, 500, 7)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed gave different output")
	}
	if c := genGH(t, 500, 8); bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same output")
	}
}

func TestGHArchiveShape(t *testing.T) {
	const n = 2000
	out := genGH(t, n, 1)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	ids := map[string]bool{}
	actors, repos := map[string]bool{}, map[string]bool{}
	var lines, pushes int
	base := time.Date(2021, 7, 21, 0, 0, 0, 0, time.UTC)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d: %v", lines+1, err)
		}
		id, _ := ev["id"].(string)
		if _, err := strconv.ParseUint(id, 10, 64); err != nil || ids[id] {
			t.Fatalf("line %d: id %q not a new decimal string", lines+1, id)
		}
		ids[id] = true
		ca, _ := ev["created_at"].(string)
		ts, err := time.Parse("2006-01-02T15:04:05Z", ca)
		if err != nil || ts.Before(base) || !ts.Before(base.Add(time.Hour)) || ts.Format("2006-01-02T15:04:05Z") != ca {
			t.Fatalf("line %d: created_at %q", lines+1, ca)
		}
		actor, _ := ev["actor"].(map[string]any)
		repo, _ := ev["repo"].(map[string]any)
		login, _ := actor["login"].(string)
		name, _ := repo["name"].(string)
		if login == "" || !bytes.Contains([]byte(name), []byte("/")) || actor["id"] == nil || repo["id"] == nil {
			t.Fatalf("line %d: actor %v repo %v", lines+1, actor, repo)
		}
		actors[login], repos[name] = true, true
		if ev["type"] == "PushEvent" {
			pushes++
			p, _ := ev["payload"].(map[string]any)
			size, _ := p["size"].(float64)
			if size < 1 || size > 20 || p["push_id"] == nil {
				t.Fatalf("line %d: push payload size %v push_id %v", lines+1, p["size"], p["push_id"])
			}
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != n {
		t.Fatalf("%d lines, want %d", lines, n)
	}
	if pushes == 0 || len(actors) > n/20 || len(repos) > n/50 || len(actors) < n/40 || len(repos) < n/100 {
		t.Fatalf("pushes %d, actors %d, repos %d", pushes, len(actors), len(repos))
	}
}
