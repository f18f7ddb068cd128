package main

// The gharchive signal: GH-Archive-shaped events resampled from the real
// events in testdata/gharchive (ghTemplatePath). Each output event is a copy
// of a random template event with its id, actor, repo, created_at and, for
// PushEvent, payload.size and payload.push_id rewritten; every other field
// and the field set stay as in the template.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ghTemplatePath is the template file, relative to the repository root.
const ghTemplatePath = "testdata/gharchive/pinot-2021-07-21-few-hours.json"

const (
	ghBaseUnix   int64 = 1626825600  // 2021-07-21T00:00:00Z
	ghSpanSecs   int64 = 3600        // created_at spreads over one hour
	ghIDBase     int64 = 20000000000 // event ids
	ghPushIDBase int64 = 9000000000  // PushEvent payload.push_id
	ghActorBase  int64 = 100000000
	ghRepoBase   int64 = 500000000
)

// ghTemplate is one template event, pre-encoded: every value except the
// rewritten ones is a json.RawMessage, so an output event costs a few map
// copies and the encoding of the changed fields only.
type ghTemplate struct {
	top     map[string]any // id, created_at, actor, repo (and payload for PushEvent) are replaced
	actor   map[string]any
	repo    map[string]any
	payload map[string]any // PushEvent only
	push    bool
}

type ghActor struct {
	id    int64
	login string
}

type ghRepo struct {
	id   int64
	name string
}

// findRepoFile finds rel under the nearest directory, from the working
// directory upwards, that holds go.mod.
func findRepoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, rel), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory to find %s", rel)
		}
		dir = parent
	}
}

// rawValues replaces every value of m except those named in keep by its
// JSON encoding.
func rawValues(m map[string]any, keep ...string) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if contains(keep, k) {
			out[k] = v
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = json.RawMessage(b)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// loadGHTemplates reads the template events (NDJSON objects).
func loadGHTemplates(path string) ([]ghTemplate, []ghActor, []ghRepo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	var ts []ghTemplate
	var actors []ghActor
	var repos []ghRepo
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var ev map[string]any
		if err := d.Decode(&ev); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %v", path, err)
		}
		actor, ok1 := ev["actor"].(map[string]any)
		repo, ok2 := ev["repo"].(map[string]any)
		if !ok1 || !ok2 {
			return nil, nil, nil, fmt.Errorf("%s: an event without actor or repo object", path)
		}
		var t ghTemplate
		t.push = ev["type"] == "PushEvent"
		if t.actor, err = rawValues(actor); err != nil {
			return nil, nil, nil, err
		}
		if t.repo, err = rawValues(repo); err != nil {
			return nil, nil, nil, err
		}
		keep := []string{}
		if p, ok := ev["payload"].(map[string]any); ok && t.push {
			if t.payload, err = rawValues(p); err != nil {
				return nil, nil, nil, err
			}
			keep = append(keep, "payload")
		}
		if t.top, err = rawValues(ev, keep...); err != nil {
			return nil, nil, nil, err
		}
		ts = append(ts, t)
		login, _ := actor["login"].(string)
		name, _ := repo["name"].(string)
		actors = append(actors, ghActor{login: login})
		repos = append(repos, ghRepo{name: name})
	}
	if len(ts) == 0 {
		return nil, nil, nil, fmt.Errorf("%s: no events", path)
	}
	return ts, actors, repos, nil
}

// generateGHArchive writes n events, one JSON object per line.
func generateGHArchive(w io.Writer, n int, seed uint64) (stats, error) {
	var st stats
	if n < 0 {
		return st, errors.New("-n must be >= 0")
	}
	path, err := findRepoFile(ghTemplatePath)
	if err != nil {
		return st, err
	}
	ts, tActors, tRepos, err := loadGHTemplates(path)
	if err != nil {
		return st, err
	}
	rng := rand.New(rand.NewPCG(seed, pcgStream))
	// Pools: real logins and repo names with a numeric suffix, so every pool
	// entry is distinct and the "owner/name" shape stays.
	actors := make([]ghActor, max(1, n/20))
	for i := range actors {
		a := tActors[rng.IntN(len(tActors))]
		actors[i] = ghActor{id: ghActorBase + int64(i), login: a.login + "-" + strconv.Itoa(i)}
	}
	repos := make([]ghRepo, max(1, n/50))
	for i := range repos {
		r := tRepos[rng.IntN(len(tRepos))]
		owner, name, ok := strings.Cut(r.name, "/")
		if !ok {
			owner, name = "owner", r.name
		}
		repos[i] = ghRepo{id: ghRepoBase + int64(i), name: owner + "/" + name + "-" + strconv.Itoa(i)}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriterSize(w, bufSize)
	}
	for i := 0; i < n; i++ {
		t := ts[rng.IntN(len(ts))]
		a := actors[rng.IntN(len(actors))]
		r := repos[rng.IntN(len(repos))]
		ev := make(map[string]any, len(t.top))
		for k, v := range t.top {
			ev[k] = v
		}
		ev["id"] = strconv.FormatInt(ghIDBase+int64(i), 10)
		created := ghBaseUnix + int64(i)*ghSpanSecs/int64(n)
		ev["created_at"] = time.Unix(created, 0).UTC().Format("2006-01-02T15:04:05Z")
		actor := make(map[string]any, len(t.actor))
		for k, v := range t.actor {
			actor[k] = v
		}
		actor["id"] = a.id
		actor["login"] = a.login
		if _, ok := actor["display_login"]; ok {
			actor["display_login"] = a.login
		}
		if _, ok := actor["url"]; ok {
			actor["url"] = "https://api.github.com/users/" + a.login
		}
		ev["actor"] = actor
		repo := make(map[string]any, len(t.repo))
		for k, v := range t.repo {
			repo[k] = v
		}
		repo["id"] = r.id
		repo["name"] = r.name
		if _, ok := repo["url"]; ok {
			repo["url"] = "https://api.github.com/repos/" + r.name
		}
		ev["repo"] = repo
		if t.payload != nil {
			p := make(map[string]any, len(t.payload))
			for k, v := range t.payload {
				p[k] = v
			}
			p["size"] = 1 + rng.IntN(20)
			p["push_id"] = ghPushIDBase + int64(i)
			ev["payload"] = p
		}
		buf.Reset()
		if err := enc.Encode(ev); err != nil { // Encode ends the line with '\n'
			return st, err
		}
		if _, err := bw.Write(buf.Bytes()); err != nil {
			return st, err
		}
		st.records++
		st.requests++
		st.bytes += int64(buf.Len())
	}
	if !ok {
		if err := bw.Flush(); err != nil {
			return st, err
		}
	}
	return st, nil
}
