package pgwire

import (
	"fmt"
	"testing"
)

// Parameters DuckDB cannot type are cast in code only, and a cast written
// after one gives its type.
func TestCastParams(t *testing.T) {
	in := "SELECT $1, '$1', \"$1\" -- $1\n, a$1, $10, $1::INT, $2"
	want := "SELECT CAST($1 AS VARCHAR), '$1', \"$1\" -- $1\n, a$1, $10, CAST($1 AS INT)::INT, $2"
	if got := castParams(in, map[int]string{1: "VARCHAR"}); got != want {
		t.Errorf("castParams:\n got %q\nwant %q", got, want)
	}
	got := paramCasts("SELECT $2::DECIMAL(3,1), $1 :: timestamp[], $2::INT, '$3::INT', $4::, $5::'x'")
	if fmt.Sprint(got) != "map[1:timestamp[] 2:DECIMAL(3,1)]" {
		t.Errorf("paramCasts: %v", got)
	}
}
