package jsonscan

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// errAt describes an expected error: its offset and a substring of its
// message. A zero errAt (msg == "") means no error is expected.
type errAt struct {
	off int
	msg string
}

func checkErr(t *testing.T, name string, it *Iter, want errAt) {
	t.Helper()
	err := it.Err()
	if want.msg == "" {
		if err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
		}
		return
	}
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Errorf("%s: got error %v, want offset %d %q", name, err, want.off, want.msg)
		return
	}
	if se.Offset != want.off || !strings.Contains(se.Msg, want.msg) {
		t.Errorf("%s: got error %q, want offset %d %q", name, err, want.off, want.msg)
	}
}

func TestReadString(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  errAt
	}{
		{in: `""`, want: ""},
		{in: `"abc"`, want: "abc"},
		{in: `  "abc"`, want: "abc"},
		{in: `"a\"b"`, want: `a"b`},
		{in: `"\\\/\b\f\n\r\t\""`, want: "\\/\b\f\n\r\t\""},
		{in: `"\u0041\u00e9\u4E2D"`, want: "Aé中"},
		{in: `"\u0000"`, want: "\x00"},
		{in: `"\ud83d\ude00"`, want: "😀"},
		{in: `"\uD83D\uDE00 ok"`, want: "😀 ok"},
		{in: `"\udbff\udfff"`, want: "\U0010FFFF"},
		{in: `"\ud83d"`, want: "\uFFFD"},
		{in: `"\ude00"`, want: "\uFFFD"},
		{in: `"\ud83dx"`, want: "\uFFFDx"},
		{in: `"\ud83d\u0041"`, want: "\uFFFDA"},
		{in: `"\ud83d\ud83d\ude00"`, want: "\uFFFD😀"},
		{in: `"\ude00\ud83d"`, want: "\uFFFD\uFFFD"},
		{in: `"héllo wörld 中文 😀"`, want: "héllo wörld 中文 😀"},
		{in: `"long string without escapes, more than eight bytes"`, want: "long string without escapes, more than eight bytes"},
		{in: `"long string with an escape \n in the middle of it"`, want: "long string with an escape \n in the middle of it"},
		{in: `"0123456789abcdef\\0123456789abcdef"`, want: `0123456789abcdef\0123456789abcdef`},
		{in: `"é\né"`, want: "é\né"},
		{in: "\"\xef\xbf\xbd\"", want: "\uFFFD"}, // a literal U+FFFD is valid

		{in: "\"\xff\"", err: errAt{1, "invalid UTF-8"}},
		{in: "\"abcdefghij\xc3\"", err: errAt{11, "invalid UTF-8"}},
		{in: "\"ab\xc3\xa9\xe4\xb8\"", err: errAt{5, "invalid UTF-8"}},
		{in: "\"\xed\xa0\x80\"", err: errAt{1, "invalid UTF-8"}}, // encoded surrogate
		{in: "\"\\n\xff\"", err: errAt{3, "invalid UTF-8"}},
		{in: "\"a\x01b\"", err: errAt{2, "control character"}},
		{in: "\"a\tb\"", err: errAt{2, "control character"}},
		{in: "\"0123456789\n\"", err: errAt{11, "control character"}},
		{in: `"\x"`, err: errAt{1, "invalid escape"}},
		{in: `"\'"`, err: errAt{1, "invalid escape"}},
		{in: `"\u12"`, err: errAt{1, "invalid \\u escape"}},
		{in: `"\u12g4"`, err: errAt{1, "invalid \\u escape"}},
		{in: `"\ud83d\u12"`, err: errAt{7, "invalid \\u escape"}},
		{in: `"abc`, err: errAt{4, "unexpected end of input"}},
		{in: `"abc\`, err: errAt{5, "unexpected end of input"}},
		{in: `"`, err: errAt{1, "unexpected end of input"}},
		{in: ``, err: errAt{0, "unexpected end of input, expected string"}},
		{in: `  `, err: errAt{2, "unexpected end of input, expected string"}},
		{in: `123`, err: errAt{0, "expected string, found number"}},
		{in: ` {}`, err: errAt{1, "expected string, found object"}},
		{in: `x`, err: errAt{0, "invalid character 'x'"}},
	}
	for _, tc := range tests {
		for _, into := range []bool{false, true} {
			var it Iter
			it.Reset([]byte(tc.in))
			var got string
			if into {
				got = string(it.ReadStringInto([]byte("pre:")))
				if !strings.HasPrefix(got, "pre:") {
					t.Errorf("ReadStringInto(%q) lost prefix: %q", tc.in, got)
					continue
				}
				got = got[4:]
			} else {
				got = string(it.ReadString())
			}
			checkErr(t, "ReadString("+tc.in+")", &it, tc.err)
			if tc.err.msg == "" {
				if got != tc.want {
					t.Errorf("ReadString(%q) = %q, want %q", tc.in, got, tc.want)
				}
				if it.Offset() != len(tc.in) {
					t.Errorf("ReadString(%q): offset %d, want %d", tc.in, it.Offset(), len(tc.in))
				}
				// Cross-check with encoding/json.
				var s string
				if err := json.Unmarshal([]byte(tc.in), &s); err != nil || s != tc.want {
					t.Errorf("encoding/json disagrees on %q: %q, %v", tc.in, s, err)
				}
			} else if got != "" {
				t.Errorf("ReadString(%q) = %q on error", tc.in, got)
			}
		}
	}
}

func TestReadStringAliasing(t *testing.T) {
	in := []byte(`["plain", "esc\naped", "plain2"]`)
	var it Iter
	it.Reset(in)
	it.ArrayStart()
	it.NextElem()
	s := it.ReadString()
	if &s[0] != &in[2] {
		t.Errorf("unescaped string does not alias the input")
	}
	it.NextElem()
	s = it.ReadString()
	if string(s) != "esc\naped" {
		t.Fatalf("got %q", s)
	}
	if &s[0] != &it.scratch[:1][0] {
		t.Errorf("escaped string is not in scratch")
	}
	// Reset keeps scratch capacity.
	c := cap(it.scratch)
	it.Reset([]byte(`"x\ty"`))
	if cap(it.scratch) != c || c == 0 {
		t.Errorf("Reset dropped scratch capacity")
	}
}

// TestScanPlain checks the word-at-a-time scanner against a byte loop for
// every special byte at every position.
func TestScanPlain(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] >= 0x20 && b[i] < 0x80 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	var specials []byte
	for c := 0; c < 256; c++ {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			specials = append(specials, byte(c))
		}
	}
	base := []byte("abcdefghijklmnopqrstuvwxyz !#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~\x7f")
	for n := 0; n <= 24; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				b := append([]byte(nil), base[:n]...)
				if pos < n {
					b[pos] = sp
					// Also place special bytes after the first one to
					// provoke borrow propagation.
					if pos+1 < n {
						b[pos+1] = 0x20
					}
					if pos+2 < n {
						b[pos+2] = '"' + 1
					}
				}
				for start := 0; start <= n; start++ {
					if got, want := scanPlain(b, start), naive(b, start); got != want {
						t.Fatalf("scanPlain(%q, %d) = %d, want %d", b, start, got, want)
					}
				}
			}
		}
	}
	// Random inputs.
	r := rand.New(rand.NewSource(1))
	for k := 0; k < 20000; k++ {
		b := make([]byte, r.Intn(40))
		for i := range b {
			if r.Intn(8) == 0 {
				b[i] = byte(r.Intn(256))
			} else {
				b[i] = base[r.Intn(len(base))]
			}
		}
		if got, want := scanPlain(b, 0), naive(b, 0); got != want {
			t.Fatalf("scanPlain(%q) = %d, want %d", b, got, want)
		}
	}
}

func TestReadInt64(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  errAt
	}{
		{in: `0`, want: 0},
		{in: `-0`, want: 0},
		{in: `7`, want: 7},
		{in: ` -123 `, want: -123},
		{in: `9223372036854775807`, want: math.MaxInt64},
		{in: `-9223372036854775808`, want: math.MinInt64},
		{in: `1000000000000000000`, want: 1e18},
		{in: `1e3`, want: 1000},
		{in: `1E+3`, want: 1000},
		{in: `5.0`, want: 5},
		{in: `-5.000`, want: -5},
		{in: `1.5e1`, want: 15},
		{in: `0.0001e4`, want: 1},
		{in: `100e-2`, want: 1},
		{in: `0.0e999999999999999`, want: 0},
		{in: `0e-5`, want: 0},
		{in: `9.223372036854775807e18`, want: math.MaxInt64},
		{in: `-922337203685477580.8e1`, want: math.MinInt64},
		{in: `00000000000000000000000000000`, err: errAt{1, "invalid character '0' in number"}},
		{in: `"123"`, want: 123},
		{in: `"-5"`, want: -5},
		{in: `"1e2"`, want: 100},
		{in: `"-9223372036854775808"`, want: math.MinInt64},
		{in: `"\u0031\u0032"`, want: 12},

		{in: `9223372036854775808`, err: errAt{0, "out of range for int64"}},
		{in: `-9223372036854775809`, err: errAt{0, "out of range for int64"}},
		{in: `18446744073709551616`, err: errAt{0, "out of range"}},
		{in: `123456789012345678901234567890`, err: errAt{0, "out of range"}},
		{in: `1e19`, err: errAt{0, "out of range"}},
		{in: `1e400`, err: errAt{0, "out of range"}},
		{in: `1e999999999999999999`, err: errAt{0, "out of range"}},
		{in: `"9223372036854775808"`, err: errAt{0, "out of range for int64"}},
		{in: `1.5`, err: errAt{0, "not an integer"}},
		{in: `1e-1`, err: errAt{0, "not an integer"}},
		{in: `1e-999999999999`, err: errAt{0, "not an integer"}},
		{in: `12345678901234567891e-1`, err: errAt{0, "not an integer"}},
		{in: `"1.5"`, err: errAt{0, "not an integer"}},
		{in: `""`, err: errAt{0, "invalid number in string"}},
		{in: `" 1"`, err: errAt{0, "invalid number in string"}},
		{in: `"1 "`, err: errAt{0, "invalid number in string"}},
		{in: `"0x10"`, err: errAt{0, "invalid number in string"}},
		{in: `"+1"`, err: errAt{0, "invalid number in string"}},
		{in: `"01"`, err: errAt{0, "invalid number in string"}},
		{in: `"abc`, err: errAt{4, "unexpected end of input"}},
		{in: `01`, err: errAt{1, "invalid character '1' in number"}},
		{in: `-`, err: errAt{1, "unexpected end of input in number"}},
		{in: `-a`, err: errAt{1, "invalid character 'a' in number"}},
		{in: `1.`, err: errAt{2, "unexpected end of input in number"}},
		{in: `1.e3`, err: errAt{2, "invalid character 'e' in number"}},
		{in: `1e`, err: errAt{2, "unexpected end of input in number"}},
		{in: `1x`, err: errAt{1, "invalid character 'x' in number"}},
		{in: `1.5.3`, err: errAt{3, "invalid character '.' in number"}},
		{in: `true`, err: errAt{0, "expected integer, found bool"}},
		{in: `NaN`, err: errAt{0, "invalid character 'N'"}},
		{in: ``, err: errAt{0, "unexpected end of input"}},
	}
	for _, tc := range tests {
		var it Iter
		it.Reset([]byte(tc.in))
		got := it.ReadInt64()
		checkErr(t, "ReadInt64("+tc.in+")", &it, tc.err)
		if got != tc.want {
			t.Errorf("ReadInt64(%s) = %d, want %d", tc.in, got, tc.want)
		}
		if tc.err.msg == "" && it.More() {
			t.Errorf("ReadInt64(%s) left input at %d", tc.in, it.Offset())
		}
	}
}

func TestReadUint64(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  errAt
	}{
		{in: `0`, want: 0},
		{in: `-0`, want: 0},
		{in: `-0.0e5`, want: 0},
		{in: `18446744073709551615`, want: math.MaxUint64},
		{in: `"18446744073709551615"`, want: math.MaxUint64},
		{in: `"1544712660000000000"`, want: 1544712660000000000},
		{in: `1.8446744073709551615e19`, want: math.MaxUint64},
		{in: `9999999999999999999`, want: 9999999999999999999},
		{in: `18446744073709551616`, err: errAt{0, "out of range"}},
		{in: `99999999999999999999`, err: errAt{0, "out of range"}},
		{in: `"18446744073709551616"`, err: errAt{0, "out of range"}},
		{in: `-1`, err: errAt{0, "out of range for uint64"}},
		{in: `"-1"`, err: errAt{0, "out of range for uint64"}},
		{in: `null`, err: errAt{0, "expected unsigned integer, found null"}},
	}
	for _, tc := range tests {
		var it Iter
		it.Reset([]byte(tc.in))
		got := it.ReadUint64()
		checkErr(t, "ReadUint64("+tc.in+")", &it, tc.err)
		if got != tc.want {
			t.Errorf("ReadUint64(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestReadFloat64(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  errAt
	}{
		{in: `0`, want: 0},
		{in: `-0`, want: math.Copysign(0, -1)},
		{in: `1.5`, want: 1.5},
		{in: `-2.5e-3`, want: -2.5e-3},
		{in: `0.1`, want: 0.1},
		{in: `1e22`, want: 1e22},
		{in: `1e23`, want: 1e23},
		{in: `9007199254740993`, want: 9007199254740992},
		{in: `123456789012345678901234567890`, want: 1.2345678901234568e29},
		{in: `1.7976931348623157e308`, want: math.MaxFloat64},
		{in: `4.9e-324`, want: 5e-324},
		{in: `1e-400`, want: 0},
		{in: `"1.5"`, want: 1.5},
		{in: `"-1e3"`, want: -1000},
		{in: `"Infinity"`, want: math.Inf(1)},
		{in: `"-Infinity"`, want: math.Inf(-1)},
		{in: `"NaN"`, want: math.NaN()},
		{in: `"\u004EaN"`, want: math.NaN()},
		{in: `1e400`, err: errAt{0, "out of range for float64"}},
		{in: `-1e400`, err: errAt{0, "out of range for float64"}},
		{in: `"1e400"`, err: errAt{0, "out of range for float64"}},
		{in: `"nan"`, err: errAt{0, "invalid number in string"}},
		{in: `"inf"`, err: errAt{0, "invalid number in string"}},
		{in: `"+Infinity"`, err: errAt{0, "invalid number in string"}},
		{in: `""`, err: errAt{0, "invalid number in string"}},
		{in: `NaN`, err: errAt{0, "invalid character 'N'"}},
		{in: `Infinity`, err: errAt{0, "invalid character 'I'"}},
		{in: `[1]`, err: errAt{0, "expected number, found array"}},
		{in: `.5`, err: errAt{0, "invalid character '.'"}},
		{in: `1.5e`, err: errAt{4, "unexpected end of input in number"}},
	}
	for _, tc := range tests {
		var it Iter
		it.Reset([]byte(tc.in))
		got := it.ReadFloat64()
		checkErr(t, "ReadFloat64("+tc.in+")", &it, tc.err)
		if math.Float64bits(got) != math.Float64bits(tc.want) && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("ReadFloat64(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestParseFloatRandom compares the exact fast path (and fallback) with
// strconv on many random decimal numbers.
func TestParseFloatRandom(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.Intn(10))
		}
		return string(b)
	}
	for k := 0; k < 200000; k++ {
		var s string
		if r.Intn(2) == 0 {
			s = "-"
		}
		ip := digits(1 + r.Intn(12))
		ip = strings.TrimLeft(ip, "0")
		if ip == "" {
			ip = "0"
		}
		s += ip
		if r.Intn(2) == 0 {
			s += "." + digits(1+r.Intn(12))
		}
		if r.Intn(2) == 0 {
			s += "e" + strconv.Itoa(r.Intn(70)-35)
		}
		want, werr := strconv.ParseFloat(s, 64)
		got, ok := parseFloat([]byte(s))
		if ok != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat(%s) = %v, %v; strconv %v, %v", s, got, ok, want, werr)
		}
	}
}

func TestReadBoolNull(t *testing.T) {
	var it Iter
	it.Reset([]byte(` true false null`))
	if !it.ReadBool() || it.ReadBool() || !it.ReadNull() || it.Err() != nil || it.More() {
		t.Fatalf("bad: %v", it.Err())
	}

	// ReadNull on a non-null consumes nothing and records no error.
	it.Reset([]byte(` "x"`))
	if it.ReadNull() || it.Err() != nil || it.Offset() != 1 {
		t.Fatalf("ReadNull on string: %v %d", it.Err(), it.Offset())
	}
	if string(it.ReadString()) != "x" {
		t.Fatalf("string not readable after ReadNull")
	}
	it.Reset(nil)
	if it.ReadNull() || it.Err() != nil {
		t.Fatalf("ReadNull at EOF: %v", it.Err())
	}

	for _, tc := range []struct {
		in   string
		bool bool
		err  errAt
	}{
		{in: `nul`, err: errAt{0, "invalid literal"}},
		{in: `nulll`, err: errAt{0, "invalid literal"}},
		{in: `null1`, err: errAt{0, "invalid literal"}},
		{in: `tru`, bool: true, err: errAt{0, "invalid literal"}},
		{in: `truex`, bool: true, err: errAt{0, "invalid literal"}},
		{in: ` fals`, bool: true, err: errAt{1, "invalid literal"}},
		{in: `True`, bool: true, err: errAt{0, "invalid character 'T'"}},
		{in: `1`, bool: true, err: errAt{0, "expected bool, found number"}},
		{in: ``, bool: true, err: errAt{0, "unexpected end of input, expected bool"}},
	} {
		it.Reset([]byte(tc.in))
		if tc.bool {
			if it.ReadBool() {
				t.Errorf("ReadBool(%q) = true", tc.in)
			}
		} else if it.ReadNull() {
			t.Errorf("ReadNull(%q) = true", tc.in)
		}
		checkErr(t, tc.in, &it, tc.err)
	}
}

func TestNext(t *testing.T) {
	var it Iter
	for in, want := range map[string]Kind{
		``: Invalid, `  `: Invalid, ` "`: String, `-`: Number, `7`: Number, `t`: Bool, `f`: Bool,
		`n`: Null, ` {`: Object, `[`: Array, `x`: Invalid, `}`: Invalid, `+1`: Invalid,
	} {
		it.Reset([]byte(in))
		if got := it.Next(); got != want {
			t.Errorf("Next(%q) = %v, want %v", in, got, want)
		}
		if it.Err() != nil {
			t.Errorf("Next(%q) recorded error %v", in, it.Err())
		}
	}
	if Object.String() != "object" || Kind(99).String() != "Kind(99)" {
		t.Errorf("Kind.String")
	}
}

func TestObjectArray(t *testing.T) {
	in := `{"a": 1, "b" : [true, null, "x", {"c":[]}, []], "": {}, "e\u0301":-2.5 }`
	var it Iter
	it.Reset([]byte(in))
	var log []string
	var visit func()
	visit = func() {
		switch it.Next() {
		case Object:
			it.ObjectStart()
			log = append(log, "{")
			for k, ok := it.NextKey(); ok; k, ok = it.NextKey() {
				log = append(log, "k:"+string(k))
				visit()
			}
			log = append(log, "}")
		case Array:
			it.ArrayStart()
			log = append(log, "[")
			for it.NextElem() {
				visit()
			}
			log = append(log, "]")
		default:
			log = append(log, string(it.Raw()))
		}
	}
	visit()
	if it.Err() != nil || it.More() {
		t.Fatalf("err %v", it.Err())
	}
	got := strings.Join(log, " ")
	want := "{ k:a 1 k:b [ true null \"x\" { k:c [ ] } [ ] ] k: { } k:e\u0301 -2.5 }"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// walkSkip walks the document with ObjectStart/NextKey/ArrayStart/NextElem
// and Skip for scalars; used to check error offsets.
func walkSkip(it *Iter) {
	switch it.Next() {
	case Object:
		if it.ObjectStart() {
			for _, ok := it.NextKey(); ok; _, ok = it.NextKey() {
				walkSkip(it)
			}
		}
	case Array:
		if it.ArrayStart() {
			for it.NextElem() {
				walkSkip(it)
			}
		}
	default:
		it.Skip()
	}
}

func TestStructureErrors(t *testing.T) {
	tests := []struct {
		in  string
		err errAt
	}{
		{`{"a":1 "b":2}`, errAt{7, `expected ',' or '}' after object member, found '"'`}},
		{`{"a":1,}`, errAt{7, `expected string key after ','`}},
		{`{"a":1,`, errAt{7, `unexpected end of input, expected string key after ','`}},
		{`{,}`, errAt{1, `expected string key or '}'`}},
		{`{1:1}`, errAt{1, `expected string key or '}'`}},
		{`{"a" 1}`, errAt{5, `expected ':' after object key, found '1'`}},
		{`{"a":}`, errAt{5, `expected value after ':'`}},
		{`{"a":`, errAt{5, `unexpected end of input, expected value after ':'`}},
		{`{"a":1]`, errAt{6, `expected ',' or '}' after object member, found ']'`}},
		{`{"a`, errAt{3, `unexpected end of input in string`}},
		{`{`, errAt{1, `unexpected end of input in object`}},
		{`[1 2]`, errAt{3, `expected ',' or ']' after array element, found '2'`}},
		{`[1,]`, errAt{3, `expected array element, found ']'`}},
		{`[,1]`, errAt{1, `expected array element, found ','`}},
		{`[1,`, errAt{3, `unexpected end of input, expected array element`}},
		{`[`, errAt{1, `unexpected end of input in array`}},
		{`[1}`, errAt{2, `expected ',' or ']' after array element, found '}'`}},
		{`[x]`, errAt{1, `expected array element, found 'x'`}},
		{`[1.]`, errAt{3, `invalid character ']' in number`}},
		{`["\q"]`, errAt{2, `invalid escape`}},
		{`}`, errAt{0, `invalid character '}' looking for beginning of value`}},
		{"[\"a\",\n  \"b\" \"c\"]", errAt{12, `expected ',' or ']' after array element, found '"'`}},
	}
	for _, tc := range tests {
		var it Iter
		it.Reset([]byte(tc.in))
		walkSkip(&it)
		checkErr(t, "walk("+tc.in+")", &it, tc.err)
		// Skip must report the same class of error (offsets may differ in
		// wording but must be present).
		it.Reset([]byte(tc.in))
		it.Skip()
		if it.Err() == nil {
			t.Errorf("Skip(%s) succeeded", tc.in)
		}
	}
	// The exact text of an error.
	var it Iter
	it.Reset([]byte(`{"traceId":"ab","x":1 "y":2}`))
	walkSkip(&it)
	if got, want := it.Err().Error(), `jsonscan: offset 22: expected ',' or '}' after object member, found '"'`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestMoreConcatenated(t *testing.T) {
	in := "{\"a\":1} {\"a\":2}\n[3]\n\"x\" 5 true null{}[]\"y\"\"z\"\n\n"
	var it Iter
	it.Reset([]byte(in))
	var got []string
	for it.More() {
		got = append(got, string(it.Raw()))
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	want := `{"a":1}|{"a":2}|[3]|"x"|5|true|null|{}|[]|"y"|"z"`
	if g := strings.Join(got, "|"); g != want {
		t.Fatalf("got %s, want %s", g, want)
	}
	// Decoding each value with typed reads.
	it.Reset([]byte(`{"v":1}` + "\n" + `{"v":2}` + "\n" + `{"v":3}`))
	var sum int64
	for it.More() {
		if it.ObjectStart() {
			for _, ok := it.NextKey(); ok; _, ok = it.NextKey() {
				sum += it.ReadInt64()
			}
		}
	}
	if it.Err() != nil || sum != 6 {
		t.Fatalf("sum %d err %v", sum, it.Err())
	}
	// Ambiguous concatenations are errors.
	for _, in := range []string{`1 01`, `12true`, `truefalse`, `nullnull`} {
		it.Reset([]byte(in))
		for it.More() {
			it.Skip()
		}
		if it.Err() == nil {
			t.Errorf("%s: no error", in)
		}
	}
	if it.More() {
		t.Errorf("More true after error")
	}
}

func TestStickyError(t *testing.T) {
	var it Iter
	it.Reset([]byte(`[1, x, "s", {"a":true}]`))
	it.ArrayStart()
	it.NextElem()
	if it.ReadInt64() != 1 {
		t.Fatal("first element")
	}
	if it.NextElem() {
		t.Fatal("NextElem on x")
	}
	first := it.Err()
	if first == nil {
		t.Fatal("no error")
	}
	off := it.Offset()
	it.ReportError(0, "later")
	if it.Next() != Invalid || it.More() || it.ObjectStart() || it.ArrayStart() || it.NextElem() ||
		it.ReadString() != nil || string(it.ReadStringInto([]byte("d"))) != "d" || it.ReadNull() || it.ReadBool() ||
		it.ReadInt64() != 0 || it.ReadUint64() != 0 || it.ReadFloat64() != 0 || it.ReadNumberRaw() != nil ||
		it.Raw() != nil {
		t.Fatal("method returned non-zero after error")
	}
	if k, ok := it.NextKey(); k != nil || ok {
		t.Fatal("NextKey after error")
	}
	it.Skip()
	if it.Err() != first || it.Offset() != off {
		t.Fatalf("error or offset changed: %v %d", it.Err(), it.Offset())
	}
	it.Reset([]byte(`1`))
	if it.Err() != nil || it.ReadInt64() != 1 {
		t.Fatal("Reset did not clear the error")
	}
}

func TestReportError(t *testing.T) {
	var it Iter
	it.Reset([]byte(`{"traceId":"zz"}`))
	it.ObjectStart()
	it.NextKey()
	off := it.Offset()
	if s := it.ReadString(); string(s) == "zz" {
		it.ReportError(off, "field traceId: invalid hex")
	}
	it.ReportError(1, "second")
	if got, want := it.Err().Error(), "jsonscan: offset 11: field traceId: invalid hex"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if it.NextKey(); it.Offset() != 15 {
		t.Fatalf("consumed after error: %d", it.Offset())
	}
}

func TestSkipRaw(t *testing.T) {
	for _, tc := range []struct {
		in, raw string
		err     errAt
	}{
		{in: ` {"a" : [1, {"b": "c\"}"}], "d": null} , 5`, raw: `{"a" : [1, {"b": "c\"}"}], "d": null}`},
		{in: `"x"`, raw: `"x"`},
		{in: `-1.5e+3]`, raw: `-1.5e+3`},
		{in: `[[],[[]],{}]`, raw: `[[],[[]],{}]`},
		{in: `false`, raw: `false`},
		{in: `[1,2`, err: errAt{4, "unexpected end of input"}},
		{in: `{"a":1,"b"}`, err: errAt{10, "expected ':' after object key, found '}'"}},
		{in: `[1,,2]`, err: errAt{3, "invalid character ','"}},
		{in: `{"a":[}`, err: errAt{6, "invalid character '}'"}},
		{in: `[{]`, err: errAt{2, "expected string key, found ']'"}},
		{in: `[tru]`, err: errAt{1, "invalid literal"}},
		{in: "[\"\xff\"]", err: errAt{2, "invalid UTF-8"}},
		{in: ``, err: errAt{0, "unexpected end of input, expected value"}},
	} {
		var it Iter
		it.Reset([]byte(tc.in))
		raw := it.Raw()
		checkErr(t, "Raw("+tc.in+")", &it, tc.err)
		if string(raw) != tc.raw {
			t.Errorf("Raw(%s) = %q, want %q", tc.in, raw, tc.raw)
		}
	}
}

func TestDepthLimit(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	var it Iter
	it.Reset(deep(maxDepth))
	it.Skip()
	if it.Err() != nil {
		t.Fatalf("Skip at max depth: %v", it.Err())
	}
	it.Reset(deep(maxDepth + 1))
	it.Skip()
	checkErr(t, "Skip too deep", &it, errAt{maxDepth, "exceeded maximum nesting depth"})

	// Mixed kinds beyond 64 levels exercise the overflow bit stack.
	var b strings.Builder
	for i := 0; i < 300; i++ {
		if i%3 == 0 {
			b.WriteString(`{"k":`)
		} else {
			b.WriteString(`[1,`)
		}
	}
	b.WriteString("0")
	for i := 299; i >= 0; i-- {
		if i%3 == 0 {
			b.WriteString(`}`)
		} else {
			b.WriteString(`]`)
		}
	}
	doc := b.String()
	it.Reset([]byte(doc))
	it.Skip()
	if it.Err() != nil || it.More() {
		t.Fatalf("mixed deep: %v", it.Err())
	}
	// Swap one closing bracket: must fail.
	bad := []byte(doc)
	k := strings.LastIndex(doc, "]}")
	bad[k], bad[k+1] = '}', ']'
	it.Reset(bad)
	it.Skip()
	if it.Err() == nil {
		t.Fatalf("mismatched deep brackets accepted")
	}

	// ObjectStart/ArrayStart count toward the same limit, and Skip adds
	// its own levels to them.
	it.Reset(deep(maxDepth + 1))
	n := 0
	for it.ArrayStart() {
		n++
	}
	if n != maxDepth || it.Err() == nil {
		t.Fatalf("ArrayStart depth %d, err %v", n, it.Err())
	}
	it.Reset([]byte("[[[[]]]]"))
	it.ArrayStart()
	it.NextElem()
	it.depth = maxDepth - 2 // pretend we are deep already
	it.Skip()
	checkErr(t, "Skip with base depth", &it, errAt{3, "exceeded maximum nesting depth"})
}

// TestMisuse calls methods out of order; nothing may panic or loop.
func TestMisuse(t *testing.T) {
	inputs := []string{``, `}`, `]`, `{}`, `[]`, `[1]`, `{"a":1}`, `,`, `:`, `"x"`, `[1,2]`, `{"a":[1]}`}
	ops := []func(*Iter){
		func(it *Iter) { it.NextKey() },
		func(it *Iter) { it.NextElem() },
		func(it *Iter) { it.ObjectStart() },
		func(it *Iter) { it.ArrayStart() },
		func(it *Iter) { it.ReadString() },
		func(it *Iter) { it.ReadInt64() },
		func(it *Iter) { it.ReadNull() },
		func(it *Iter) { it.Skip() },
		func(it *Iter) { it.Next() },
	}
	for _, in := range inputs {
		for a := range ops {
			for b := range ops {
				for c := range ops {
					var it Iter
					it.Reset([]byte(in))
					for k := 0; k < 3; k++ {
						ops[a](&it)
						ops[b](&it)
						ops[c](&it)
					}
				}
			}
		}
	}
	// A caller that never consumes the first array element must not loop
	// forever.
	var it Iter
	it.Reset([]byte(`[1,2]`))
	it.ArrayStart()
	n := 0
	for it.NextElem() && n < 10 {
		n++
	}
	if n != 1 || it.Err() == nil {
		t.Fatalf("unconsumed element: n=%d err=%v", n, it.Err())
	}
	// The zero Iter behaves like empty input.
	var z Iter
	if z.Next() != Invalid || z.More() || z.Err() != nil {
		t.Fatal("zero Iter")
	}
}

func TestNoAllocs(t *testing.T) {
	line := otlpLine(20)
	var it Iter
	// Warm up scratch with an escaped string.
	it.Reset([]byte(`"a\nb"`))
	it.ReadString()
	mixed := []byte(`["esc\u00e9aped", "1e2", 1.25, -3e-5, "NaN", 12345678901234567890123, "\"x\""]`)
	allocs := testing.AllocsPerRun(100, func() {
		it.Reset(line)
		decodeTyped(&it)
		it.Reset(line)
		visitAll(&it)
		it.Reset(line)
		it.Skip()
		it.Reset(mixed)
		it.ArrayStart()
		it.NextElem()
		it.ReadString()
		it.NextElem()
		it.ReadInt64()
		it.NextElem()
		it.ReadFloat64()
		it.NextElem()
		it.ReadFloat64()
		it.NextElem()
		it.ReadFloat64()
		it.NextElem()
		it.ReadFloat64()
		it.NextElem()
		it.ReadString()
		it.NextElem()
	})
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func TestReadNumberRaw(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      errAt
	}{
		{in: ` -12.5e+07,`, want: `-12.5e+07`},
		{in: `0]`, want: `0`},
		{in: `123456789012345678901234567890`, want: `123456789012345678901234567890`},
		{in: `"1"`, err: errAt{0, "expected number, found string"}},
		{in: `'1'`, err: errAt{0, `invalid character '\''`}},
		{in: "\x00", err: errAt{0, "invalid character byte 0x0"}},
		{in: `1e+`, err: errAt{3, "unexpected end of input in number"}},
		{in: `-01`, err: errAt{2, "invalid character '1' in number"}},
		{in: ``, err: errAt{0, "unexpected end of input, expected number"}},
	} {
		var it Iter
		it.Reset([]byte(tc.in))
		got := it.ReadNumberRaw()
		checkErr(t, "ReadNumberRaw("+tc.in+")", &it, tc.err)
		if string(got) != tc.want {
			t.Errorf("ReadNumberRaw(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
