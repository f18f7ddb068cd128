package main

import (
	"strings"
	"testing"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

func TestSameAnswer(t *testing.T) {
	want := []benchutil.Row{{"/a", "100.5"}, {"/b", "2e+08"}}
	for _, c := range []struct {
		got      []benchutil.Row
		floatCol int
		diff     string // substring of the difference, "" for none
	}{
		{[]benchutil.Row{{"/a", "100.5"}, {"/b", "2e+08"}}, 1, ""},
		{[]benchutil.Row{{"/a", "100.50000001"}, {"/b", "200000000.1"}}, 1, ""},
		{[]benchutil.Row{{"/a", "100.6"}, {"/b", "2e+08"}}, 1, "row 1"},
		{[]benchutil.Row{{"/a", "100.50000001"}, {"/b", "2e+08"}}, -1, "row 1"},
		{[]benchutil.Row{{"/a", "100.5"}}, 1, "1 rows, want 2"},
		{[]benchutil.Row{{"/a", "100.5"}, {"/c", "2e+08"}}, 1, "row 2"},
		{[]benchutil.Row{{"/a", "100.5"}, {"/b", "NULL"}}, 1, "row 2"},
	} {
		d := sameAnswer(c.got, want, c.floatCol)
		if (c.diff == "") != (d == "") || !strings.Contains(d, c.diff) {
			t.Errorf("sameAnswer(%v) = %q, want %q", c.got, d, c.diff)
		}
	}
}

func TestCheckReference(t *testing.T) {
	ref := map[string][]benchutil.Row{
		"status": {{"200", "6"}, {"500", "4"}},
		"errors": {{"a", "1"}, {"b", "3"}},
		"p99":    {{"/x", "1.5"}},
	}
	if err := checkReference(ref, 10); err != nil {
		t.Errorf("checkReference: %v", err)
	}
	if err := checkReference(ref, 11); err == nil {
		t.Error("checkReference accepted a wrong total")
	}
	ref["errors"] = []benchutil.Row{{"a", "1"}}
	if err := checkReference(ref, 10); err == nil {
		t.Error("checkReference accepted errors that do not add up")
	}
}

func TestQuerySQL(t *testing.T) {
	// Every path fills every placeholder and names its own attached database.
	for _, q := range queries {
		for _, p := range queryPaths {
			s := p.sql(q)
			if strings.Contains(s, "{") && !strings.Contains(s, `'[{`) {
				t.Errorf("%s on %s: unfilled placeholder: %s", q.name, p.name(), s)
			}
			if !strings.Contains(s, " FROM "+p.enc+".") {
				t.Errorf("%s on %s: reads another database: %s", q.name, p.name(), s)
			}
		}
	}
}
