package transforms

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shredduck/shredduck/shred"
)

// refCell is what the reference flattener expects in a column: a type and
// the text form, or for JSON and lists the JSON value (compared decoded).
type refCell struct {
	typ  string
	text string
	val  any
	json bool
}

// refFlatten flattens a JSON object the slow, independent way: decoded
// with encoding/json (repeated keys: the last wins), types by parsing and
// re-formatting with strconv and time. It returns an error for anything
// encoding/json does not read as exactly one JSON object.
func refFlatten(data []byte, maxDepth int) (map[string]refCell, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	out := map[string]refCell{}
	var walk func(m map[string]any, path string, depth int)
	walk = func(m map[string]any, path string, depth int) {
		for k, x := range m {
			p := strings.NewReplacer(`\`, `\\`, `.`, `\.`).Replace(k)
			if depth > 1 {
				p = path + "." + p
			}
			switch x := x.(type) {
			case nil:
			case map[string]any:
				if depth >= maxDepth {
					out[p] = refCell{typ: "JSON", val: x, json: true}
				} else {
					walk(x, p, depth+1)
				}
			case []any:
				out[p] = refList(x)
			default:
				out[p] = refScalar(x)
			}
		}
	}
	walk(obj, "", 1)
	return out, nil
}

func refScalar(x any) refCell {
	switch x := x.(type) {
	case bool:
		return refCell{typ: "BOOLEAN", text: strconv.FormatBool(x)}
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, x); err == nil && ts.Year() >= 1000 &&
			ts.UTC().Format("2006-01-02T15:04:05.999999Z") == x {
			return refCell{typ: "TIMESTAMPTZ", text: x}
		}
		return refCell{typ: "VARCHAR", text: x}
	case json.Number:
		s := x.String()
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(i, 10) == s {
			return refCell{typ: "BIGINT", text: s}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) &&
			string(shred.AppendText(nil, shred.Value{Kind: shred.Double, Float: f})) == s {
			return refCell{typ: "DOUBLE", text: s}
		}
		return refCell{typ: "VARCHAR", text: s}
	}
	panic("unexpected")
}

func refList(x []any) refCell {
	elem := ""
	for _, e := range x {
		switch e.(type) {
		case nil:
			continue
		case map[string]any, []any:
			return refCell{typ: "JSON", val: x, json: true}
		}
		c := refScalar(e)
		if _, isNum := e.(json.Number); isNum && c.typ == "VARCHAR" {
			return refCell{typ: "JSON", val: x, json: true} // not canonical
		}
		if elem != "" && elem != c.typ {
			return refCell{typ: "JSON", val: x, json: true}
		}
		elem = c.typ
	}
	if elem == "" {
		elem = `"NULL"`
	}
	return refCell{typ: elem + "[]", val: x, json: true}
}

func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkRow compares row of b with the reference cells: the same keys, the
// same text (JSON compared decoded), and a column type that holds the
// reference type (a repeated key's earlier values may widen it).
func checkRow(t *testing.T, b *shred.Batch, row int, want map[string]refCell) {
	t.Helper()
	got := map[string]*shred.Column{}
	for _, d := range b.Dyn {
		if row < d.Col.Len && d.Col.IsValid(row) {
			got[d.Key] = d.Col
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("row %d: unexpected key %q = %s", row, k, got[k].AppendTextAt(nil, row))
		}
	}
	for k, w := range want {
		c := got[k]
		if c == nil {
			t.Errorf("row %d: key %q missing, want %s %s%v", row, k, w.typ, w.text, w.val)
			continue
		}
		typ := c.Type.SQL()
		if wk := shred.KindFromSQL(w.typ); shred.Widen(c.Type.DynKind(), wk) != c.Type.DynKind() {
			t.Errorf("row %d: key %q is %s, which does not hold %s", row, k, typ, w.typ)
		}
		text := string(c.AppendTextAt(nil, row))
		if !w.json {
			if text != w.text {
				t.Errorf("row %d: key %q = %s %q, want %s %q", row, k, typ, text, w.typ, w.text)
			}
			continue
		}
		v, err := decodeJSON(text)
		if err != nil || !reflect.DeepEqual(v, w.val) {
			t.Errorf("row %d: key %q = %s %s, want %s %v (%v)", row, k, typ, text, w.typ, w.val, err)
		}
	}
}

const fuzzPrefixLine = `{"a":1,"b":"x","c":[1,2],"d":{"e":true},"t":"2015-01-01T00:00:00Z","l":[],"j":[{}],"f":0.5,"n":9007199254740993}`

// FuzzNDJSON checks the flattening path against refFlatten: the same
// cells, errors exactly for what is not one JSON object (or holds invalid
// UTF-8, which encoding/json accepts), no trace of a failed line, and no
// change to an earlier row's text when a line widens its columns.
func FuzzNDJSON(f *testing.F) {
	for _, l := range readGHArchive(f)[:5] {
		f.Add(l)
	}
	for _, s := range []string{
		fuzzPrefixLine, `{}`, `[]`, `1`, `{"a":{"b":{"c":{"d":{"e":1}}}}}`, `{"a":1,"a":{"b":2},"a":{"c":3}}`,
		`{"a.b":1,"a":{"b":2}}`, `{"":{"":[]}}`, `{"a":"x","b":2.5,"c":[1.0],"d":-0,"e":1e400}`,
		`{"c":["2015-01-01T00:00:00Z",null],"t":1,"n":"y","l":[true,false]}`,
		`{"a":"\u0000\ud800","\\":{".":1}}`, `{"a":1}x`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	const depth = 4
	tr := NewNDJSON(depth)
	prefixRef, err := refFlatten([]byte(fuzzPrefixLine), depth)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ref, refErr := refFlatten(data, depth)
		b := shred.NewBatch(tr.Core())
		n, err := tr.AppendJSON(b, data)
		switch {
		case err != nil && n != 0, err == nil && n != 1:
			t.Fatalf("%d rows, error %v", n, err)
		case err == nil && refErr != nil:
			t.Fatalf("accepted what encoding/json rejects (%v)", refErr)
		case err != nil && refErr == nil && utf8.Valid(data):
			t.Fatalf("rejected what encoding/json reads: %v", err)
		case err != nil && b.Rows != 0:
			t.Fatalf("%d rows after an error", b.Rows)
		}
		if err == nil {
			finishPadded(b)
			checkNDJSONBatch(t, b)
			checkRow(t, b, 0, ref)
		}

		// After a row whose columns the line may widen.
		b = shred.NewBatch(tr.Core())
		if _, err := tr.AppendJSON(b, []byte(fuzzPrefixLine)); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]string{}
		for _, d := range b.Dyn {
			kinds[d.Key] = d.Col.Type.SQL()
		}
		_, err2 := tr.AppendJSON(b, data)
		if (err2 == nil) != (err == nil) {
			t.Fatalf("error %v alone, %v after a row", err, err2)
		}
		finishPadded(b)
		checkNDJSONBatch(t, b)
		checkRow(t, b, 0, prefixRef)
		if err2 != nil {
			if b.Rows != 1 {
				t.Fatalf("%d rows after an error", b.Rows)
			}
			for _, d := range b.Dyn {
				if k, ok := kinds[d.Key]; ok && k != d.Col.Type.SQL() {
					t.Errorf("column %s is %s after a failed line, was %s", d.Key, d.Col.Type.SQL(), k)
				}
			}
			return
		}
		checkRow(t, b, 1, ref)
	})
}
