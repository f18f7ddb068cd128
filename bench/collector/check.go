package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// waitRows waits until every signal's table holds at least n rows, summed
// over the nodes.
func waitRows(ctx context.Context, client *http.Client, nodes []*shredduck, n int) error {
	for {
		counts := map[string]int64{}
		done := true
		for _, sig := range signals {
			for _, sd := range nodes {
				c, err := tableRows(ctx, client, sd.url, sig.table)
				if err != nil {
					return err
				}
				counts[sig.table] += c
			}
			if counts[sig.table] < int64(n) {
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v of %d each", counts, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkTables checks that the nodes' tables together hold exactly what
// was sent: every id of [0, n) of each signal in one row on one node, of
// the bench's resource; with several nodes, every node holds some rows.
// It returns what is wrong.
func checkTables(ctx context.Context, client *http.Client, nodes []*shredduck, n int) ([]string, error) {
	var problems []string
	held := make([]int64, len(nodes))
	for _, sig := range signals {
		seen := make([]int32, n)
		var total int64
		var perNode []string
		for i, sd := range nodes {
			rows, err := tableRows(ctx, client, sd.url, sig.table)
			if err != nil {
				return nil, err
			}
			perNode = append(perNode, fmt.Sprintf("node%d %d", i+1, rows))
			if rows == 0 {
				continue
			}
			r, err := queryRow(ctx, client, sd.url, fmt.Sprintf(
				`SELECT count(*), count(DISTINCT service_name), min(service_name), coalesce(string_agg(CAST("bench.id" AS VARCHAR), ','), '') FROM %s`, sig.table))
			if err != nil {
				return nil, err
			}
			rows, _ = strconv.ParseInt(r[0], 10, 64)
			total += rows
			held[i] += rows
			if r[1] != "1" || r[2] != "collector-bench" {
				problems = append(problems, fmt.Sprintf("node%d %s: %s services, the least %q; want 1, collector-bench", i+1, sig.table, r[1], r[2]))
			}
			ids := 0
			for s := range strings.SplitSeq(r[3], ",") {
				id, err := strconv.Atoi(s)
				if err != nil || id < 0 || id >= n {
					problems = append(problems, fmt.Sprintf("node%d %s: bench.id %q is not one that was sent", i+1, sig.table, s))
					continue
				}
				seen[id]++
				ids++
			}
			if int64(ids) != rows {
				problems = append(problems, fmt.Sprintf("node%d %s: %d rows but %d with a sent bench.id", i+1, sig.table, rows, ids))
			}
		}
		var missing, dup []int
		for id, c := range seen {
			switch {
			case c == 0:
				missing = append(missing, id)
			case c > 1:
				dup = append(dup, id)
			}
		}
		fmt.Fprintf(os.Stderr, "collector: %-12s table: rows %d (%s), ids of [0, %d) missing %d, more than once %d\n",
			sig.table, total, strings.Join(perNode, ", "), n, len(missing), len(dup))
		if total != int64(n) {
			problems = append(problems, fmt.Sprintf("%s: %d rows, want %d", sig.table, total, n))
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d ids missing, e.g. %v", sig.table, len(missing), missing[:min(len(missing), 10)]))
		}
		if len(dup) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d ids stored more than once, e.g. %v", sig.table, len(dup), dup[:min(len(dup), 10)]))
		}
	}
	if len(nodes) > 1 {
		for i, h := range held {
			if h == 0 {
				problems = append(problems, fmt.Sprintf("node%d holds no rows: the group gave it nothing", i+1))
			}
		}
	}
	return problems, nil
}
