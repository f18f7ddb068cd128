package ingest

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/shred"
)

// TestWidenSQLMatchesGo renders values with the SQL of widenUsing, in a
// session whose time zone is not UTC, and with shred.AppendText: a value
// widened by ALTER TABLE must read exactly as one widened in a batch.
func TestWidenSQLMatchesGo(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "w.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SQL.SetMaxOpenConns(1)
	if _, err := db.SQL.Exec("SET TimeZone = 'Asia/Kathmandu'"); err != nil {
		t.Fatal(err)
	}
	// render runs the USING expression for a column of type typ over
	// literals (SQL expressions of that type) and returns the texts.
	render := func(typ string, from, to shred.Kind, lits []string) []string {
		t.Helper()
		using := widenUsing(`"c"`, from, to)
		if using == "" {
			using = `CAST("c" AS VARCHAR)`
		}
		q := "SELECT " + using + " FROM (SELECT CAST(l AS " + typ + ") AS c, i FROM (VALUES " +
			func() string {
				rows := make([]string, len(lits))
				for i, l := range lits {
					rows[i] = "(" + l + ", " + strconv.Itoa(i) + ")"
				}
				return strings.Join(rows, ", ")
			}() + ") v(l, i)) ORDER BY i"
		rows, err := db.SQL.Query(q)
		if err != nil {
			t.Fatalf("%.300s: %v", q, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	check := func(what string, got []string, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d results for %d values", what, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: SQL renders %q, Go %q", what, got[i], want[i])
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 8))

	t.Run("DOUBLE", func(t *testing.T) {
		vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, -2.5, 1e15, 1e15 + 0.5, 1 << 53, 1<<53 + 2, -(1 << 53),
			-(1<<53 + 2), 1e16, 1e21, 1e22, 1e-4, 1e-5, 1e-7, 5e-324, math.MaxFloat64, 123456.789, 0.3,
			9.999999999999999e15, math.NaN(), math.Inf(1), math.Inf(-1)}
		for i := 0; i < 300; i++ {
			if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) {
				vals = append(vals, f)
			}
			vals = append(vals, float64(r.Int64N(1<<54)-1<<53), r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)))
		}
		var lits, want []string
		for _, v := range vals {
			lits = append(lits, "'"+strconv.FormatFloat(v, 'g', -1, 64)+"'")
			want = append(want, string(shred.AppendText(nil, shred.Value{Kind: shred.Double, Float: v})))
		}
		check("DOUBLE", render("DOUBLE", shred.Double, shred.String, lits), want)
	})

	t.Run("BIGINT and BOOLEAN casts", func(t *testing.T) {
		var lits, want []string
		for _, v := range []int64{0, -1, math.MaxInt64, math.MinInt64, 1 << 53, r.Int64(), -r.Int64()} {
			lits = append(lits, strconv.FormatInt(v, 10))
			want = append(want, strconv.FormatInt(v, 10))
		}
		check("BIGINT", render("BIGINT", shred.Int64, shred.String, lits), want)
		check("BOOLEAN", render("BOOLEAN", shred.Bool, shred.String, []string{"true", "false"}), []string{"true", "false"})
	})

	t.Run("TIMESTAMPTZ", func(t *testing.T) {
		lo, _ := shred.ParseTimestamp([]byte("1000-01-01T00:00:00Z"))
		hi, _ := shred.ParseTimestamp([]byte("9999-12-31T23:59:59.999999Z"))
		var lits, want []string
		for i := 0; i < 500; i++ {
			us := lo + r.Int64N(hi-lo)
			switch i % 4 {
			case 0:
				us -= us % 1000000
			case 1:
				us -= us % 1000
			}
			s := string(shred.AppendTimestamp(nil, us))
			lits = append(lits, "'"+s+"'")
			want = append(want, s)
		}
		for _, s := range []string{"1000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "1970-01-01T00:00:00Z",
			"1969-12-31T23:59:59.999999Z", "2015-02-01T00:00:00.00001Z", "1883-11-18T12:00:00.5Z"} {
			lits = append(lits, "'"+s+"'")
			want = append(want, s)
		}
		check("TIMESTAMPTZ", render("TIMESTAMPTZ", shred.TimestampTZ, shred.String, lits), want)
	})

	t.Run("lists", func(t *testing.T) {
		strs := []string{"", "a\"b\\c/d", "é\u2028😀", "x y"}
		for c := 0; c < 0x20; c++ {
			strs = append(strs, "<"+string(rune(c))+">")
		}
		elems := map[shred.Kind][]shred.Value{}
		for _, s := range strs {
			elems[shred.String] = append(elems[shred.String], shred.Value{Kind: shred.String, Bytes: []byte(s)})
		}
		for _, f := range []float64{0.5, -2.25, 1e-05, 1e+16, 1.2345678901234568e+17, 1000000000000000.5} {
			elems[shred.Double] = append(elems[shred.Double], shred.Value{Kind: shred.Double, Float: f})
		}
		for _, n := range []int64{0, -7, math.MaxInt64} {
			elems[shred.Int64] = append(elems[shred.Int64], shred.Value{Kind: shred.Int64, Int: n})
		}
		elems[shred.Bool] = []shred.Value{{Kind: shred.Bool, Int: 1}, {Kind: shred.Bool}}
		for _, s := range []string{"2015-01-01T00:00:00Z", "1999-12-31T23:59:59.000001Z"} {
			us, _ := shred.ParseTimestamp([]byte(s))
			elems[shred.TimestampTZ] = append(elems[shred.TimestampTZ], shred.Value{Kind: shred.TimestampTZ, Int: us})
		}
		elems[shred.Null] = nil
		for elem, vs := range elems {
			k := shred.ListKind(elem)
			lists := [][]shred.Value{{}, {{}}, append([]shred.Value{{}}, vs...), vs}
			var lits, want []string
			for _, l := range lists {
				v := shred.Value{Kind: k, Elems: l}
				text := string(shred.AppendText(nil, v))
				lits = append(lits, "JSON "+shred.QuoteString(text))
				want = append(want, text)
			}
			for _, to := range []shred.Kind{shred.String, shred.JSON} {
				check(k.String()+" to "+to.String(), render(k.String(), k, to, lits), want)
			}
		}
	})
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"244.1 MiB": 255957401, "18.8 GiB": 20186346291, "512 bytes": 512, "1.0 KiB": 1024, "x": 0, "3 parsecs": 0} {
		if got := parseSize(s); got != want {
			t.Errorf("parseSize(%q) = %d, want %d", s, got, want)
		}
	}
}
