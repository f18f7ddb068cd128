package shred

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	for s, ok := range map[string]bool{
		"2015-01-01T00:00:00Z":           true,
		"2015-02-01T00:00:00.00001Z":     true,
		"2015-02-01T00:00:00.1Z":         true,
		"2015-02-01T00:00:00.123456Z":    true,
		"1000-01-01T00:00:00Z":           true,
		"9999-12-31T23:59:59.999999Z":    true,
		"2000-02-29T00:00:00Z":           true,
		"1969-12-31T23:59:59.999999Z":    true,
		"2015-02-01T00:00:00.000010Z":    false, // trailing zero
		"2015-02-01T00:00:00.0Z":         false, // zero fraction
		"2015-02-01T00:00:00.Z":          false,
		"2015-02-01T00:00:00.1234567Z":   false, // beyond microseconds
		"2015-01-01T01:00:00+02:00":      false,
		"2015-01-01T00:00:00+00:00":      false,
		"2015-01-01T00:00:00z":           false,
		"2015-01-01t00:00:00Z":           false,
		"2015-01-01 00:00:00Z":           false,
		"0999-12-31T23:59:59Z":           false,
		"1900-02-29T00:00:00Z":           false,
		"2015-02-29T00:00:00Z":           false,
		"2015-04-31T00:00:00Z":           false,
		"2015-00-01T00:00:00Z":           false,
		"2015-01-00T00:00:00Z":           false,
		"2015-01-01T24:00:00Z":           false,
		"2015-01-01T00:60:00Z":           false,
		"2015-01-01T00:00:60Z":           false,
		"2015-1-01T00:00:00Z":            false,
		"2015-01-01T00:00:0aZ":           false,
		"2015-01-01T00:00:00":            false,
		"":                               false,
		"2015-01-01T00:00:00.12345aZ":    false,
		"2015-01-01T00:00:00.123456789Z": false,
	} {
		us, got := ParseTimestamp([]byte(s))
		if got != ok {
			t.Errorf("ParseTimestamp(%q) ok = %v, want %v", s, got, ok)
			continue
		}
		if !ok {
			continue
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		if us != want.UnixMicro() {
			t.Errorf("ParseTimestamp(%q) = %d, want %d", s, us, want.UnixMicro())
		}
		if back := string(AppendTimestamp(nil, us)); back != s {
			t.Errorf("AppendTimestamp(ParseTimestamp(%q)) = %q", s, back)
		}
	}
}

// Every microsecond value from year 1000 to 9999 renders canonically and
// parses back; the rendering agrees with the time package.
func TestTimestampRoundTrip(t *testing.T) {
	lo := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		us := lo + r.Int64N(hi-lo+1)
		switch i % 4 {
		case 1:
			us -= us % 1000000 // whole seconds
		case 2:
			us -= us % 1000 // milliseconds
		}
		s := AppendTimestamp(nil, us)
		want := time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.999999Z")
		if string(s) != want {
			t.Fatalf("AppendTimestamp(%d) = %s, want %s", us, s, want)
		}
		back, ok := ParseTimestamp(s)
		if !ok || back != us {
			t.Fatalf("ParseTimestamp(%s) = %d, %v; want %d", s, back, ok, us)
		}
	}
}
