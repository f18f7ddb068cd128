package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// walk builds an encoding/json-style tree (map[string]any, []any, string,
// float64, bool, nil) from the next value. Strings are read alternately
// with ReadString and ReadStringInto (by depth), and every number is
// cross-checked with ReadNumberRaw, ReadInt64 and ReadUint64 on copies of
// the iterator.
func walk(t testing.TB, it *Iter, depth int) any {
	switch it.Next() {
	case String:
		if depth%2 == 0 {
			return string(it.ReadString())
		}
		return string(it.ReadStringInto([]byte("prefix")))[len("prefix"):]
	case Number:
		checkNumber(t, it)
		return it.ReadFloat64()
	case Bool:
		return it.ReadBool()
	case Null:
		if !it.ReadNull() && it.Err() == nil {
			t.Fatalf("ReadNull returned false without error")
		}
		return nil
	case Object:
		m := map[string]any{}
		if !it.ObjectStart() {
			return nil
		}
		for {
			k, ok := it.NextKey()
			if !ok {
				break
			}
			key := string(k)
			m[key] = walk(t, it, depth+1)
		}
		return m
	case Array:
		a := []any{}
		if !it.ArrayStart() {
			return nil
		}
		for it.NextElem() {
			a = append(a, walk(t, it, depth+1))
		}
		return a
	default:
		it.Skip() // records the error (or end of input)
		return nil
	}
}

// checkNumber verifies ReadNumberRaw, ReadInt64 and ReadUint64 on the
// number at the iterator's position against math/big and strconv, using
// copies of the iterator so the caller's iterator is not advanced.
func checkNumber(t testing.TB, it *Iter) {
	cp := *it
	cp.scratch = nil
	raw := cp.ReadNumberRaw()
	if cp.Err() != nil {
		return // the real read will fail the same way
	}
	// Float: must match strconv exactly (including range errors).
	cp2 := *it
	cp2.scratch = nil
	f := cp2.ReadFloat64()
	want, err := strconv.ParseFloat(string(raw), 64)
	if (err != nil) != (cp2.Err() != nil) || (err == nil && math.Float64bits(f) != math.Float64bits(want)) {
		t.Fatalf("ReadFloat64(%s) = %v, %v; strconv: %v, %v", raw, f, cp2.Err(), want, err)
	}
	// Integers: compare with big.Rat unless the exponent is huge.
	if k := bytes.IndexAny(raw, "eE"); k >= 0 {
		exp := strings.TrimLeft(string(raw[k+1:]), "+-")
		if len(strings.TrimLeft(exp, "0")) > 3 {
			return
		}
	}
	r, ok := new(big.Rat).SetString(string(raw))
	if !ok {
		t.Fatalf("big.Rat rejects %q", raw)
	}
	isInt := r.IsInt()
	cp3 := *it
	cp3.scratch = nil
	i64 := cp3.ReadInt64()
	wantI64 := isInt && r.Num().IsInt64()
	if wantI64 != (cp3.Err() == nil) || (wantI64 && i64 != r.Num().Int64()) {
		t.Fatalf("ReadInt64(%s) = %d, %v; want ok=%v value %s", raw, i64, cp3.Err(), wantI64, r.Num())
	}
	cp4 := *it
	cp4.scratch = nil
	u64 := cp4.ReadUint64()
	wantU64 := isInt && r.Num().IsUint64()
	if wantU64 != (cp4.Err() == nil) || (wantU64 && u64 != r.Num().Uint64()) {
		t.Fatalf("ReadUint64(%s) = %d, %v; want ok=%v value %s", raw, u64, cp4.Err(), wantU64, r.Num())
	}
}

// walkDoc walks a whole document that must contain exactly one value.
func walkDoc(t testing.TB, it *Iter, data []byte) (any, error) {
	it.Reset(data)
	v := walk(t, it, 0)
	if it.Err() == nil && it.More() {
		it.ReportError(it.Offset(), "trailing data after top-level value")
	}
	if it.Err() == nil && it.depth != 0 {
		t.Fatalf("depth %d after successful walk of %q", it.depth, data)
	}
	return v, it.Err()
}

// checkDifferential compares Iter with encoding/json on one input.
//
// Deliberate difference: Iter rejects invalid UTF-8 inside strings, which
// json.Valid accepts and json.Unmarshal replaces with U+FFFD. Such inputs
// (json.Valid but not utf8.Valid) must fail with an "invalid UTF-8" error
// from Skip, and the walk must fail.
func checkDifferential(t testing.TB, data []byte) {
	valid := json.Valid(data)
	var want any
	uerr := json.Unmarshal(data, &want)

	var it Iter
	got, werr := walkDoc(t, &it, data)
	checkErrOffset(t, werr, data)

	// Raw/Skip validate without converting numbers.
	it.Reset(data)
	raw := it.Raw()
	if it.Err() == nil && it.More() {
		it.ReportError(it.Offset(), "trailing data after top-level value")
	}
	serr := it.Err()
	checkErrOffset(t, serr, data)

	switch {
	case !valid:
		if werr == nil {
			t.Fatalf("walk accepted invalid JSON %q", data)
		}
		if serr == nil {
			t.Fatalf("Raw accepted invalid JSON %q", data)
		}
	case !utf8.Valid(data):
		if werr == nil {
			t.Fatalf("walk accepted invalid UTF-8 %q", data)
		}
		if serr == nil || !strings.Contains(serr.Error(), "invalid UTF-8") {
			t.Fatalf("Raw on invalid UTF-8 %q: got error %v", data, serr)
		}
	case uerr != nil:
		// Valid syntax that encoding/json cannot represent (a number
		// overflowing float64).
		if werr == nil {
			t.Fatalf("walk accepted %q, encoding/json: %v", data, uerr)
		}
		if serr != nil {
			t.Fatalf("Raw rejected valid JSON %q: %v", data, serr)
		}
	default:
		if werr != nil {
			t.Fatalf("walk rejected valid JSON %q: %v", data, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("walk of %q:\n got %#v\nwant %#v", data, got, want)
		}
		if serr != nil {
			t.Fatalf("Raw rejected valid JSON %q: %v", data, serr)
		}
		if trimmed := strings.Trim(string(data), " \t\r\n"); string(raw) != trimmed {
			t.Fatalf("Raw(%q) = %q, want %q", data, raw, trimmed)
		}
	}
}

func checkErrOffset(t testing.TB, err error, data []byte) {
	if err == nil {
		return
	}
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is %T, not *SyntaxError", err, err)
	}
	if se.Offset < 0 || se.Offset > len(data) {
		t.Fatalf("error offset %d outside input of length %d: %v", se.Offset, len(data), err)
	}
	if !strings.HasPrefix(err.Error(), "jsonscan: offset "+strconv.Itoa(se.Offset)+": ") {
		t.Fatalf("bad error text %q", err)
	}
}

var diffDocs = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `-1.5e-3`, `1E+2`, `1e400`, `-1e400`, `1e-400`,
	`123456789012345678901234567890`, `0.1`, `9007199254740993`, `2.2250738585072011e-308`,
	`4.9e-324`, `1.7976931348623157e308`, `1.7976931348623159e308`, `18446744073709551615`,
	`18446744073709551616`, `-9223372036854775808`, `-9223372036854775809`, `5.0`, `1e3`, `1.5e1`,
	`100e-2`, `0.000e99`, `12345678901234567891e-1`, `0.1e1`, `123e-2`,
	`""`, `"abc"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud83d"`,
	`"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\udbff\udfff"`, `"\u0000"`,
	`"héllo wörld 中文 😀"`, `"0123456789abcdef\"0123456789abcdef"`, `"\u00"`, `"\x"`, `"abc`, `"a` + "\x01" + `"`,
	"\"\xff\"", "\"\xed\xa0\x80\"", "\"abc\xc3\"", "\"0123456789\xe4\xb8\"", "\"\u2028\"",
	`{}`, `[]`, `{"a":1}`, `{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`, ` { "a" : [ 1 , 2 ] } `,
	`{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`, `{"\u0061":1}`, `{"a\nb":true}`,
	`[[[[[]]]]]`, `[{}, [], "", 0, null, true]`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:1}`, `[1 2]`, `{"a":1 "b":2}`,
	`[}`, `{]`, `]`, `}`, `,`, `:`, `[`, `{`, `{"a":`, `{"a":[`, `[1,`,
	``, ` `, `nul`, `nulll`, `tru`, `truex`, `True`, `NaN`, `Infinity`, `-`, `01`, `1.`, `.5`, `1e`, `1e+`,
	`+1`, `0x10`, `1.5.2`, `--1`, `-a`, `1 2`, `{} {}`, `"a" "b"`, `1true`, `[1true]`, `nullnull`,
	"\t\n\r 1 \t\n\r", "\v1", "1\x00", `[1]x`, `"\u0020"`, `"\/"`,
}

func TestDifferential(t *testing.T) {
	for _, d := range diffDocs {
		checkDifferential(t, []byte(d))
	}
	// Every prefix of some realistic documents (truncated input).
	for _, d := range []string{
		`{"a":[1,2.5e3,"x\u00e9\ud83d\ude00y",true,false,null,{"b":{}}],"c":-0.0}`,
		string(otlpLine(3)),
	} {
		for n := 0; n <= len(d); n++ {
			checkDifferential(t, []byte(d[:n]))
		}
	}
}

func TestDifferentialDepth(t *testing.T) {
	for _, n := range []int{1, 64, 65, 128, 129, 9999, 10000, 10001} {
		for _, open := range []string{"[", `{"k":`, `[{"a":[`} {
			var b strings.Builder
			var closeSeq []string
			for b.Len() < n*len(open) {
				b.WriteString(open)
				switch open {
				case "[":
					closeSeq = append(closeSeq, "]")
				case `{"k":`:
					closeSeq = append(closeSeq, "}")
				default:
					closeSeq = append(closeSeq, "]}]")
				}
			}
			b.WriteString("1")
			for i := len(closeSeq) - 1; i >= 0; i-- {
				b.WriteString(closeSeq[i])
			}
			checkDifferential(t, []byte(b.String()))
		}
	}
}

func FuzzIter(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2.5e3,"x",true,false,null,{"b":{}}],"c":-0.0}`,
		`"\ud83d\ude00\ud83d\u0041\\\"\/\b\f\n\r\t"`,
		"\"h\xc3\xa9llo \xff\"",
		`[1e400, -0, 0.1, 18446744073709551616, 9223372036854775807]`,
		`{"a":1,}`,
		`[[[[[[[[[[]]]]]]]]]]`,
		`{"traceId":"5b8efff798038103d269b633813fc60c","startTimeUnixNano":"1544712660000000000"}`,
		` { "a" : [ 1 , 2 ] } `,
		`nul`,
		`01`,
		`"abc`,
		`{"a" 1}`,
		string(otlpLine(1)),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDifferential(t, data)
	})
}
