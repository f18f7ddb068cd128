package ingest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/transforms"
)

const (
	ghPinot    = "../testdata/gharchive/pinot-2021-07-21-few-hours.json"
	ghQuickwit = "../testdata/gharchive/quickwit-gharchive-100.derived.ndjson"
)

// ghEvent is what the tests compute from GH Archive lines with
// encoding/json, independently of shredduck.
type ghEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Public    bool   `json:"public"`
	CreatedAt string `json:"created_at"`
	Actor     struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
	} `json:"actor"`
	Repo struct {
		Name string `json:"name"`
	} `json:"repo"`
	Payload struct {
		Size    *int64            `json:"size"`
		PushID  *int64            `json:"push_id"`
		Commits []json.RawMessage `json:"commits"`
	} `json:"payload"`
}

func readGH(t *testing.T, path string) []ghEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ghEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e ghEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// catalogKeys returns the catalog keys of a table's columns.
func catalogKeys(t *testing.T, db *ingest.DB, table string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for k, c := range catalog(t, db, table) {
		if c.Level != "record" {
			t.Errorf("%s: key %q at level %s", table, c.Key, c.Level)
		}
		out[k] = true
	}
	return out
}

func TestGHArchive(t *testing.T) {
	pinot, quickwit := readGH(t, ghPinot), readGH(t, ghQuickwit)
	db := openDB(t)
	none := ingest.Options{Transform: transforms.None}
	withTable := func(name string) ingest.Options { o := none; o.Table = name; return o }

	// Cold loads: each file alone, both together, and both with auto.
	resP := mustLoad(t, db, withTable("pinot"), ghPinot)
	resQ := mustLoad(t, db, withTable("quickwit"), ghQuickwit)
	resB := mustLoad(t, db, withTable("gh"), ghPinot, ghQuickwit)
	resA := mustLoad(t, db, ingest.Options{}, ghPinot, ghQuickwit)
	for _, c := range []struct {
		res   *ingest.Result
		table string
		rows  int
	}{{resP, "pinot", len(pinot)}, {resQ, "quickwit", len(quickwit)}, {resB, "gh", len(pinot) + len(quickwit)}, {resA, "ndjson", len(pinot) + len(quickwit)}} {
		s := stats(t, c.res, c.table)
		if !s.Created || s.Rows != int64(c.rows) || s.Transform != transforms.None || s.ColumnsAdded == 0 || c.res.Errors != 0 {
			t.Errorf("%s: %+v", c.table, *s)
		}
		if n := rowCount(t, db, c.table); n != int64(c.rows) {
			t.Errorf("%s: %d rows, want %d (the lines)", c.table, n, c.rows)
		}
		t.Logf("%s: %d rows, %d columns added", c.table, s.Rows, s.ColumnsAdded)
	}

	t.Run("loading both files gives the union of their columns", func(t *testing.T) {
		p, q, b := catalogKeys(t, db, "pinot"), catalogKeys(t, db, "quickwit"), catalogKeys(t, db, "gh")
		union := map[string]bool{}
		for k := range p {
			union[k] = true
		}
		for k := range q {
			union[k] = true
		}
		if len(b) != len(union) {
			t.Errorf("both files: %d keys; pinot %d, quickwit %d, union %d", len(b), len(p), len(q), len(union))
		}
		for k := range union {
			if !b[k] {
				t.Errorf("key %q missing from the table of both files", k)
			}
		}
		if a := catalogKeys(t, db, "ndjson"); len(a) != len(b) {
			t.Errorf("auto: %d keys, none: %d", len(a), len(b))
		}
		// The same union by evolution: quickwit loaded into pinot's table.
		res := mustLoad(t, db, withTable("pinot"), ghQuickwit)
		s := stats(t, res, "pinot")
		if s.Created || s.ColumnsAdded != len(union)-len(p) {
			t.Errorf("quickwit into pinot: %+v, want %d columns added", *s, len(union)-len(p))
		}
		if got := len(catalogKeys(t, db, "pinot")); got != len(union) {
			t.Errorf("pinot then quickwit: %d keys, want %d", got, len(union))
		}
		if got := len(tableColumns(t, db, "gh")); got != len(union)+1 {
			t.Errorf("gh has %d columns, want %d keys + _overflow (no map: no key overflowed)", got, len(union))
		}
	})

	t.Run("warm: the same data again adds no column", func(t *testing.T) {
		res := mustLoad(t, db, withTable("gh"), ghPinot, ghQuickwit)
		s := stats(t, res, "gh")
		if s.Created || s.ColumnsAdded != 0 || s.ColumnsWidened != 0 || s.Rows != int64(len(pinot)+len(quickwit)) {
			t.Errorf("re-ingest: %+v", *s)
		}
		if n := rowCount(t, db, "gh"); n != 2*int64(len(pinot)+len(quickwit)) {
			t.Errorf("%d rows after re-ingest", n)
		}
	})

	// The rest reads table "ndjson" (both files, once, with auto).
	events := append(append([]ghEvent{}, pinot...), quickwit...)

	t.Run("events per type", func(t *testing.T) {
		want := map[string]int{}
		for _, e := range events {
			want[e.Type]++
		}
		got := map[string]int{}
		for _, r := range queryStrings(t, db, `SELECT "type", count(*) FROM ndjson GROUP BY ALL`) {
			var n int
			fmt.Sscan(r[1], &n)
			got[r[0]] = n
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events per type:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("top repos by pushes", func(t *testing.T) {
		pushes := map[string]int{}
		for _, e := range events {
			if e.Type == "PushEvent" {
				pushes[e.Repo.Name]++
			}
		}
		type rc struct {
			repo string
			n    int
		}
		var want []rc
		for r, n := range pushes {
			want = append(want, rc{r, n})
		}
		sort.Slice(want, func(i, j int) bool {
			return want[i].n > want[j].n || (want[i].n == want[j].n && want[i].repo < want[j].repo)
		})
		want = want[:10]
		var got []rc
		for _, r := range queryStrings(t, db, `SELECT "repo.name", count(*) AS n FROM ndjson WHERE "type" = 'PushEvent'
			GROUP BY ALL ORDER BY n DESC, "repo.name" LIMIT 10`) {
			var n int
			fmt.Sscan(r[1], &n)
			got = append(got, rc{r[0], n})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("top repos:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("sum of push sizes", func(t *testing.T) {
		var want int64
		for _, e := range events {
			if e.Type == "PushEvent" && e.Payload.Size != nil {
				want += *e.Payload.Size
			}
		}
		if got := queryInt(t, db, `SELECT sum("payload.size") FROM ndjson WHERE "type" = 'PushEvent'`); got != want || want == 0 {
			t.Errorf("sum of payload.size = %d, want %d", got, want)
		}
	})

	t.Run("column types", func(t *testing.T) {
		for col, want := range map[string]string{
			"id": "VARCHAR", "type": "VARCHAR", "public": "BOOLEAN", "created_at": "TIMESTAMP WITH TIME ZONE",
			"actor.id": "BIGINT", "actor.login": "VARCHAR", "repo.name": "VARCHAR", "payload.size": "BIGINT",
			"payload.commits": "JSON", "payload.pull_request.merged": "BOOLEAN", "payload.release.assets": `"NULL"[]`,
			"payload.pull_request.head.repo.full_name": "VARCHAR", "payload.pull_request.requested_teams": "JSON",
		} {
			if got := columnType(t, db, "ndjson", col); got != want {
				t.Errorf("%s is %s, want %s", col, got, want)
			}
		}
		c := catalogEntry(t, db, "ndjson", "record", "created_at")
		if c.Column != "created_at" || c.Type != "TIMESTAMPTZ" || c.Overflow || c.WidenedFrom.Valid {
			t.Errorf("catalog row of created_at: %+v", c)
		}
		if c := catalogEntry(t, db, "ndjson", "record", "payload.release.assets"); c.Type != `"NULL"[]` {
			t.Errorf("catalog row of payload.release.assets: %+v", c)
		}
	})

	t.Run("every value of a few keys", func(t *testing.T) {
		byID := map[string]ghEvent{}
		for _, e := range events {
			byID[e.ID] = e
		}
		rows := queryStrings(t, db, `SELECT id, epoch_us(created_at), "actor.id", "actor.login", "public",
			"payload.push_id", json_array_length("payload.commits"), "payload.commits"->>'$[0]' FROM ndjson`)
		if len(rows) != len(events) {
			t.Fatalf("%d rows", len(rows))
		}
		for _, r := range rows {
			e, ok := byID[r[0]]
			if !ok {
				t.Fatalf("id %s is not in the files", r[0])
			}
			ts, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{e.ID, fmt.Sprint(ts.UnixMicro()), fmt.Sprint(e.Actor.ID), e.Actor.Login, fmt.Sprint(e.Public), "<NULL>", "<NULL>", "<NULL>"}
			if e.Payload.PushID != nil {
				want[5] = fmt.Sprint(*e.Payload.PushID)
			}
			if e.Payload.Commits != nil {
				want[6] = fmt.Sprint(len(e.Payload.Commits))
				if len(e.Payload.Commits) > 0 {
					var buf bytes.Buffer
					json.Compact(&buf, e.Payload.Commits[0])
					want[7] = buf.String()
				}
			}
			if fmt.Sprint(r) != fmt.Sprint(want) {
				t.Errorf("event %s:\n got %q\nwant %q", e.ID, r, want)
			}
		}
	})

	t.Run("spot check", func(t *testing.T) {
		// quickwit's second line: a PushEvent from 2015 with a sub-second timestamp
		row := scanRow(t, db, `SELECT strftime(created_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ') AS ts, "payload.size" AS size,
			"payload.distinct_size" AS ds, "public", "repo.name" AS repo, "payload.commits"->>'$[0].author.name' AS author
			FROM ndjson WHERE id = '2549961022'`)
		want := map[string]any{"ts": "2015-02-01T00:00:00.001000Z", "size": int64(1), "ds": int64(1), "public": true,
			"repo": "elektronika-ba/ctrl-android-test1", "author": "elektronika-ba"}
		if fmt.Sprint(row) != fmt.Sprint(want) {
			t.Errorf("event 2549961022:\n got %v\nwant %v", row, want)
		}
	})
}

// A widened column holds what the JSON said, text for text, for rows
// loaded before and after the widening: in one batch, across batches and
// across loads, whatever the session's time zone. A value that would need
// a lossy widening is a stray ("~" below: in the overflow under the key,
// read by its companion column), counted in the catalog. The column's
// kind is that of the first batch's values, most of them (a tie: the
// first Kind), so one batch and a batch per line may differ (one).
func TestNDJSONWideningKeepsText(t *testing.T) {
	for _, tc := range []struct {
		vals    []string // JSON values of v, in order
		typ     string   // the column's type at the end
		want    []string // its values as DuckDB casts them to VARCHAR, or ~ and the stray's text
		oneTyp  string   // typ and want of the table loaded in one batch, where they differ
		oneWant []string
	}{
		{[]string{`1`, `2.5`, `"x"`}, "DOUBLE", []string{"1.0", "2.5", "~x"}, "", nil},
		{[]string{`1`, `2.5`}, "DOUBLE", []string{"1.0", "2.5"}, "", nil},
		{[]string{`1`, `1e+16`, `0.0001`, `"x"`}, "DOUBLE", []string{"1.0", "1e+16", "0.0001", "~x"}, "", nil},
		{[]string{`9007199254740993`, `2.5`}, "BIGINT", []string{"9007199254740993", "~2.5"}, "", nil},
		{[]string{`2.5`, `-9007199254740993`}, "DOUBLE", []string{"2.5", "~-9007199254740993"},
			"BIGINT", []string{"~2.5", "-9007199254740993"}},
		{[]string{`12345678901234567890`, `1`}, "VARCHAR", []string{"12345678901234567890", "1"},
			"BIGINT", []string{"~12345678901234567890", "1"}},
		{[]string{`1`, `1.0`}, "BIGINT", []string{"1", "~1.0"}, "", nil},
		{[]string{`"2015-01-01T01:00:00Z"`, `"2015-01-01T01:00:00.5Z"`, `"2015-01-01T01:00:00+02:00"`},
			"TIMESTAMPTZ", []string{"2014-12-31 21:30:00-03:30", "2014-12-31 21:30:00.5-03:30", "~2015-01-01T01:00:00+02:00"}, "", nil},
		{[]string{`"1000-01-01T00:00:00.00001Z"`, `true`}, "TIMESTAMPTZ", []string{"0999-12-31 20:29:08.00001-03:30", "~true"},
			"BOOLEAN", []string{"~1000-01-01T00:00:00.00001Z", "true"}},
		{[]string{`true`, `1`}, "BOOLEAN", []string{"true", "~1"}, "", nil},
		{[]string{`[1,null]`, `[2.5]`}, "BIGINT[]", []string{"[1, NULL]", "~[2.5]"}, "", nil},
		{[]string{`[]`, `[1]`}, "BIGINT[]", []string{"[]", "[1]"}, "", nil},
		{[]string{`[null]`, `["2015-01-01T00:00:00.25Z"]`, `"x"`}, "TIMESTAMPTZ[]", []string{"[NULL]", "['2014-12-31 20:30:00.25-03:30']", "~x"}, "", nil},
		{[]string{`[0.5,1e-05]`, `[{"a":1}]`}, "DOUBLE[]", []string{"[0.5, 1e-05]", `~[{"a":1}]`},
			"JSON", []string{"[0.5,1e-05]", `[{"a":1}]`}},
		{[]string{`["a\"\u0001\b"]`, `"s"`}, "VARCHAR[]", []string{"['a\"\x01\b']", "~s"},
			"VARCHAR", []string{`["a\"\u0001\b"]`, "s"}},
		{[]string{`[true]`, `[1]`}, "BOOLEAN[]", []string{"[true]", "~[1]"}, "", nil},
		{[]string{`[]`, `[{"a":1}]`}, "JSON", []string{"[]", `[{"a":1}]`}, "", nil},
	} {
		t.Run(strings.Join(tc.vals, " "), func(t *testing.T) {
			dir := t.TempDir()
			var lines []string
			for i, v := range tc.vals {
				lines = append(lines, fmt.Sprintf(`{"i":%d,"v":%s}`, i, v))
			}
			db := openDB(t)
			if _, err := db.SQL.Exec("SET GLOBAL TimeZone = 'America/St_Johns'"); err != nil {
				t.Fatal(err)
			}
			opt := ingest.Options{Transform: transforms.None}
			opt.Table = "one_batch"
			mustLoad(t, db, opt, ndjson(t, dir, "all.jsonl", lines...))
			opt.Table, opt.BatchRows = "batch_per_line", 1
			res := mustLoad(t, db, opt, ndjson(t, dir, "all.jsonl", lines...))
			widened := stats(t, res, "batch_per_line").ColumnsWidened
			opt.Table, opt.BatchRows = "load_per_line", 0
			var first string
			for i, l := range lines {
				res := mustLoad(t, db, opt, ndjson(t, dir, fmt.Sprintf("l%d.jsonl", i), l))
				widened += stats(t, res, "load_per_line").ColumnsWidened
				if i == 0 {
					first = catalogEntry(t, db, "load_per_line", "record", "v").Type
				}
			}
			for _, table := range []string{"one_batch", "batch_per_line", "load_per_line"} {
				typ, want := tc.typ, tc.want
				if table == "one_batch" && tc.oneTyp != "" {
					typ, want = tc.oneTyp, tc.oneWant
				}
				got := strayValues(t, db, table, "v", "i")
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: %q, want %q", table, got, want)
				}
				if got := columnType(t, db, table, "v"); got != strings.ReplaceAll(typ, "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE") {
					t.Errorf("%s: v is %s, want %s", table, got, typ)
				}
				strays := 0
				for _, v := range want {
					if strings.HasPrefix(v, "~") {
						strays++
					}
				}
				if c := catalogEntry(t, db, table, "record", "v"); c.Type != typ || c.Strays != int64(strays) {
					t.Errorf("%s: catalog says %s, %d strays, want %s, %d", table, c.Type, c.Strays, typ, strays)
				}
			}
			if widened == 0 && tc.typ != first {
				t.Errorf("no widening counted")
			}
		})
	}
}

func TestNDJSONIdentifiers(t *testing.T) {
	long := strings.Repeat("k", 10000)
	line := map[string]any{
		"a.b": 1, "a": map[string]any{"b": 2, "": 3}, "User": 4, "user": 5, "USER": 6, "": 7,
		long: 8, "nul\x00": 9, `q"uote`: 10, "_overflow": 11, "x'; DROP TABLE ndjson; --": 12,
		"resource.x": 13, `back\slash`: 14,
	}
	data, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := openDB(t)
	// json.Marshal sorts keys; a second line in another order must map the
	// same way.
	mustLoad(t, db, ingest.Options{Transform: transforms.None}, ndjson(t, dir, "keys.jsonl", string(data), `{"a":{"b":20},"a.b":10}`))
	cat := catalog(t, db, "ndjson")
	used := map[string]string{}
	for key, want := range map[string]int{
		`a\.b`: 1, "a.b": 2, "a.": 3, "User": 4, "user": 5, "USER": 6, "": 7, long: 8, "nul\x00": 9, `q"uote`: 10,
		"_overflow": 11, "x'; DROP TABLE ndjson; --": 12, `resource\.x`: 13, `back\\slash`: 14,
	} {
		c, ok := cat["record\x00"+key]
		if !ok {
			t.Errorf("no catalog row for key %.40q", key)
			continue
		}
		if other, dup := used[strings.ToLower(c.Column)]; dup {
			t.Errorf("keys %.40q and %.40q share column %.40q", other, key, c.Column)
		}
		used[strings.ToLower(c.Column)] = key
		if got := queryInt(t, db, "SELECT "+quoteIdent(c.Column)+" FROM ndjson ORDER BY "+quoteIdent(c.Column)+" NULLS LAST LIMIT 1"); got != int64(want) {
			t.Errorf("key %.40q (column %.40q) = %d, want %d", key, c.Column, got, want)
		}
	}
	for key, col := range map[string]string{"": "~empty", "a.": "a.", "nul\x00": "nul\uFFFD",
		"_overflow": "_overflow~2", `resource\.x`: "resource.x", `back\\slash`: `back\slash`} {
		if got := cat["record\x00"+key].Column; got != col {
			t.Errorf("key %q: column %q, want %q", key, got, col)
		}
	}
	// {"a.b":…} and {"a":{"b":…}} both want "a.b"; the first seen gets it.
	if x, y := cat["record\x00a.b"].Column, cat["record\x00"+`a\.b`].Column; !(x == "a.b" && y == "a.b~2") && !(x == "a.b~2" && y == "a.b") {
		t.Errorf("a.b and a\\.b are in columns %q and %q", x, y)
	}
	// the second line, keys in the other order
	if got := queryStrings(t, db, `SELECT `+quoteIdent(cat["record\x00a.b"].Column)+`, `+quoteIdent(cat[`record`+"\x00"+`a\.b`].Column)+
		` FROM ndjson WHERE "User" IS NULL`); fmt.Sprint(got) != "[[20 10]]" {
		t.Errorf("a.b and a\\.b of the second line: %v", got)
	}
}

// Beyond --max-columns keys go to _overflow under their catalog key.
func TestNDJSONMaxColumns(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{Transform: transforms.None, MaxColumns: 2}, ndjson(t, dir, "wide.jsonl",
		`{"a":1,"b":"x","c":{"d.e":[1,2]},"f":"2015-01-01T00:00:00Z","g":null}`, `{"f":"later","h":true}`))
	s := stats(t, res, "ndjson")
	if s.ColumnsAdded != 2 || s.KeysOverflowed != 3 {
		t.Errorf("%+v, want 2 columns, 3 keys overflowed", *s)
	}
	// A list and a timestamp go to the JSON overflow, a string and a
	// boolean to their maps, each value by its own kind (f's timestamp is
	// not made text by the string of another row); each key reads as its
	// column (ingest.KeyColumns), typed.
	rows := queryStrings(t, db, `SELECT a, b, CAST(_overflow AS VARCHAR), CAST(_overflow_str AS VARCHAR), CAST(_overflow_bool AS VARCHAR) FROM ndjson ORDER BY a NULLS LAST`)
	want := [][]string{{"1", "x", `{"c.d\\.e":[1,2],"f":"2015-01-01T00:00:00Z"}`, "<NULL>", "<NULL>"}, {"<NULL>", "<NULL>", "<NULL>", "{f=later}", "{h=true}"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	if c := catalogEntry(t, db, "ndjson", "record", `c.d\.e`); !c.Overflow || c.Column != "c.d.e" || c.Type != "BIGINT[]" {
		t.Errorf("catalog of an overflowed key: %+v", c)
	}
	row := keyRow(t, db, "ndjson", "a = 1")
	if fmt.Sprintf("%v %v %v", row["c.d.e"], row["f"], row["h"]) != "[1 2] 2015-01-01T00:00:00Z <nil>" {
		t.Errorf("overflowed keys read back: %v %v %v", row["c.d.e"], row["f"], row["h"])
	}
	row = keyRow(t, db, "ndjson", "a IS NULL")
	if row["f"] != "later" || row["h"] != true || row["c.d.e"] != nil {
		t.Errorf("overflowed keys of row 2: %v %v %v", row["c.d.e"], row["f"], row["h"])
	}
}

func TestNDJSONMaxDepth(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{Transform: transforms.None, MaxDepth: 2}, ndjson(t, dir, "deep.jsonl",
		`{"a":{"b":{"c":{"d":1}}},"x":{"y":2}}`, `{"a":{"b":{"e":[]}}}`))
	if s := stats(t, res, "ndjson"); s.DepthTruncated != 2 {
		t.Errorf("DepthTruncated = %d, want 2", s.DepthTruncated)
	}
	if got := queryStrings(t, db, `SELECT CAST("a.b" AS VARCHAR), "x.y" FROM ndjson ORDER BY ALL`); fmt.Sprint(got) != `[[{"c":{"d":1}} 2] [{"e":[]} <NULL>]]` {
		t.Errorf("a.b: %v", got)
	}
	if columnType(t, db, "ndjson", "a.b") != "JSON" {
		t.Error("a.b is not JSON")
	}
}

// Lines that are not JSON objects are reported with file, line, reason and
// snippet; with --max-errors they are skipped and counted.
func TestNDJSONBadLines(t *testing.T) {
	dir := t.TempDir()
	lines := []string{`{"ok":1}`, `[{"ok":2}]`, `42`, `{"ok":3`, "{\"ok\":\"\xff\"}", `{"ok":4} x`, `{"ok":5}`}
	p := ndjson(t, dir, "bad.jsonl", lines...)
	db := openDB(t)
	_, err := load(t, db, ingest.Options{Transform: transforms.None}, p)
	var re *ingest.RecordError
	if !errors.As(err, &re) || re.Input != p || re.Line != 2 || re.Snippet != `[{"ok":2}]` || !strings.Contains(err.Error(), p+":2") {
		t.Fatalf("error %v (%+v), want a RecordError at %s:2 with the line as snippet", err, re, p)
	}
	if tableExists(t, db, "ndjson") {
		t.Error("the failed load left a table")
	}
	res, err := load(t, db, ingest.Options{Transform: transforms.None, MaxErrors: 5}, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 5 || res.Records != 2 || rowCount(t, db, "ndjson") != 2 {
		t.Errorf("errors %d, records %d, rows %d; want 5, 2, 2", res.Errors, res.Records, rowCount(t, db, "ndjson"))
	}
	for i, want := range []string{":2: not a JSON object but a JSON array", ":3: not a JSON object but a JSON number",
		":4: jsonscan: offset 7: unexpected end of input", ":5: jsonscan: offset 7: invalid UTF-8 in string", ":6: jsonscan: offset 9: unexpected data after the object"} {
		if i >= len(res.ErrorSamples) || !strings.Contains(res.ErrorSamples[i], p+want) {
			t.Errorf("error sample %d: %q, want it to contain %q", i, res.ErrorSamples, want)
		}
	}
	if _, err := load(t, db, ingest.Options{Transform: transforms.None, MaxErrors: 4}, p); err == nil || !errors.Is(err, ingest.ErrTooManyErrors) {
		t.Errorf("5 bad lines with MaxErrors 4: %v", err)
	}
	// A bad first line: still NDJSON, not a pretty-printed document.
	for _, first := range []string{`{"cut":`, `[1,2]`, `"text"`} {
		p := ndjson(t, dir, "first.jsonl", first, `{"ok":1}`, `{"ok":2}`)
		res, err := load(t, db, ingest.Options{Transform: transforms.None, MaxErrors: 1, Table: "first"}, p)
		if err != nil || res.Errors != 1 || res.Records != 2 || !strings.Contains(res.ErrorSamples[0], p+":1:") {
			t.Errorf("first line %s: %v, %+v", first, err, res)
		}
	}
}

// With transform auto, JSON objects that are not OTLP requests go to the
// none transform, line by line.
func TestAutoSendsOtherJSONToNone(t *testing.T) {
	dir := t.TempDir()
	p := ndjson(t, dir, "mixed.jsonl", traceLine(nil, span{"s", nil}), `{"event":"push","n":1}`, `{}`, `{"event":"pull"}`)
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{}, p)
	if n := rowCount(t, db, "otel_traces"); n != 1 {
		t.Errorf("otel_traces: %d rows", n)
	}
	if got := queryStrings(t, db, `SELECT event, n FROM ndjson ORDER BY event`); fmt.Sprint(got) != "[[pull <NULL>] [push 1]]" {
		t.Errorf("ndjson: %v", got)
	}
	if s := stats(t, res, "ndjson"); s.Transform != transforms.None || s.Rows != 2 {
		t.Errorf("%+v", *s)
	}
	// One table cannot take both.
	if _, err := load(t, db, ingest.Options{Table: "one"}, p); err == nil || !strings.Contains(err.Error(), "written by transform") {
		t.Errorf("mixed input into one table: %v", err)
	}
	if _, err := load(t, db, ingest.Options{Transform: transforms.None, Table: "otel_traces"}, ndjson(t, dir, "x.jsonl", `{"a":1}`)); err == nil ||
		!strings.Contains(err.Error(), "otel_traces is the table of transform otlp-traces") {
		t.Errorf("none into a traces table: %v", err)
	}
}
