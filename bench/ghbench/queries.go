package main

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// A query is written once over the field expressions {type}, {repo},
// {actor}, {size}, {ts} and {table}; each path supplies its own. Top-10
// lists break ties by name, so every encoding returns the same rows.
// Queries with info set have no speedup target: they show a cost that
// column storage does not remove.
type query struct {
	name, sql string
	info      bool
}

var queries = []query{
	{"types", `SELECT {type} AS type, count(*) AS events FROM {table} GROUP BY 1 ORDER BY 2 DESC, 1`, false},
	{"top_push_repos", `SELECT {repo} AS repo, count(*) AS pushes FROM {table} WHERE {type} = 'PushEvent' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10`, false},
	{"actor_repos", `SELECT {actor} AS actor, count(DISTINCT {repo}) AS repos FROM {table} GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10`, false},
	{"push_size", `SELECT sum({size})::BIGINT AS commits FROM {table} WHERE {type} = 'PushEvent'`, false},
	// Minutes by time_bucket, formatted after grouping: date_trunc on a
	// TIMESTAMPTZ goes through ICU's calendar for every row and costs
	// about 8x more (75-95 ms of the ~100 ms on 247k events, where the
	// JSON column needs ~600 ms), which per_minute_date_trunc shows.
	{"per_minute", `SELECT strftime(minute, '%Y-%m-%d %H:%M') AS minute, events FROM (SELECT time_bucket(INTERVAL 1 minute, {ts}) AS minute, count(*) AS events FROM {table} GROUP BY 1) ORDER BY 1`, false},
	{"per_minute_date_trunc", `SELECT strftime(date_trunc('minute', {ts}), '%Y-%m-%d %H:%M') AS minute, count(*) AS events FROM {table} GROUP BY 1 ORDER BY 1`, true},
}

type queryPath struct {
	name, method string
	fields       map[string]string
}

var paths = []queryPath{
	{"shredded", "column", map[string]string{"table": "shredded.gh",
		"type": `"type"`, "repo": `"repo.name"`, "actor": `"actor.login"`, "size": `"payload.size"`, "ts": `created_at`}},
	{"json_column", "json_extract", map[string]string{"table": "json_column.gh",
		"type": `json_extract_string(json, '$.type')`, "repo": `json_extract_string(json, '$.repo.name')`,
		"actor": `json_extract_string(json, '$.actor.login')`, "size": `CAST(json_extract_string(json, '$.payload.size') AS BIGINT)`,
		"ts": `CAST(json->>'$.created_at' AS TIMESTAMPTZ)`}},
	{"read_json_auto", "struct", map[string]string{"table": "read_json_auto.gh",
		"type": `"type"`, "repo": `repo.name`, "actor": `actor.login`, "size": `payload.size`, "ts": `created_at`}},
}

func (p queryPath) sql(q query) string {
	s := q.sql
	for k, v := range p.fields {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case *big.Int:
		return x.String()
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// sameAnswer compares the rows sorted, so equal sets in a different order of
// equal keys still match; "" when equal.
func sameAnswer(got, want []benchutil.Row) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	key := func(r benchutil.Row) string { return strings.Join(r, "\x00") }
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i], w[i] = key(got[i]), key(want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	for i := range g {
		if g[i] != w[i] {
			return fmt.Sprintf("row %q, want %q", strings.ReplaceAll(g[i], "\x00", " | "), strings.ReplaceAll(w[i], "\x00", " | "))
		}
	}
	return ""
}
