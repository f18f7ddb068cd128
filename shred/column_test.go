package shred

import (
	"math"
	"testing"
)

// TestAppendTextDouble pins the text form of doubles: integral values
// within ±2^53 as integers, everything else as DuckDB's DOUBLE -> VARCHAR
// cast (values read off DuckDB 1.5.6), so that a column widened inside a
// batch and one widened by ALTER TABLE (ingest's widen) hold the same text.
func TestAppendTextDouble(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := string(AppendText(nil, Value{Kind: Double, Float: v})); got != want {
			t.Errorf("AppendText(%v) = %q, want %q", v, got, want)
		}
	}
	f(1e15, "1000000000000000")
	f(1e16, "1e+16")
	f(1e-5, "1e-05")
	f(0.0001, "0.0001")
	f(1.5e300, "1.5e+300")
	f(math.NaN(), "nan")
	f(math.Inf(-1), "-inf")
	f(math.Inf(1), "inf")
	f(2.5, "2.5")
	f(1, "1")
	f(0, "0")
	f(123456.789, "123456.789")
	f(1e21, "1e+21")
	f(5e-324, "5e-324")
	f(0.1, "0.1")
	f(1e-7, "1e-07")
	f(12345678901234567.0, "1.2345678901234568e+16")
	f(9007199254740992.0, "9007199254740992")
	f(9007199254740994.0, "9007199254740994.0")
	f(-9007199254740992.0, "-9007199254740992")
	f(math.Copysign(0, -1), "0")
	f(1000000000000000.5, "1000000000000000.5")
	f(-3, "-3")
	f(-2.5, "-2.5")
	f(-0.001, "-0.001")
}
