package transforms

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// keyValueBoth reads msg with keyValue (the fast form first) and with
// keyValueFields (field by field) and reports the two outcomes.
func keyValueBoth(msg []byte) (fast, fields string) {
	read := func(f func(*pbDecoder, []byte, func([]byte, shred.Value)) error) string {
		var out string
		err := f(new(pbDecoder), msg, func(k []byte, v shred.Value) {
			out = fmt.Sprintf("key %q kind %d int %d float %v bytes %q", k, v.Kind, v.Int, math.Float64bits(v.Float), v.Bytes)
		})
		if err != nil {
			return "error"
		}
		return out
	}
	return read((*pbDecoder).keyValue), read((*pbDecoder).keyValueFields)
}

// kvMessages are KeyValue encodings in the forms pbKeyValueFast reads and
// in others it must leave to the field-by-field reader.
func kvMessages() [][]byte {
	tag := protowire.AppendTag
	any := func(fields ...[]byte) []byte {
		var b []byte
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	str := protowire.AppendBytes(tag(nil, 1, protowire.BytesType), []byte("v"))
	blob := protowire.AppendBytes(tag(nil, 7, protowire.BytesType), []byte{0, 0xff})
	boolean := protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 7)
	integer := protowire.AppendVarint(tag(nil, 3, protowire.VarintType), math.MaxUint64)
	double := protowire.AppendFixed64(tag(nil, 4, protowire.Fixed64Type), math.Float64bits(-2.5))
	array := protowire.AppendBytes(tag(nil, 5, protowire.BytesType), protowire.AppendBytes(tag(nil, 1, protowire.BytesType), str))
	strindex := protowire.AppendVarint(tag(nil, 8, protowire.VarintType), 3)
	values := [][]byte{
		nil, str, blob, boolean, integer, double, array, strindex,
		any(str, integer), // the last field wins
		any(str, protowire.AppendVarint(tag(nil, 99, protowire.VarintType), 1)), // an unknown field
		str[:len(str)-1], // truncated
		protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1), // wrong wire type
		protowire.AppendVarint(tag(nil, 4, protowire.VarintType), 1),
		protowire.AppendFixed32(tag(nil, 4, protowire.Fixed32Type), 1),
	}
	key := protowire.AppendBytes(tag(nil, 1, protowire.BytesType), []byte("http.route"))
	emptyKey := protowire.AppendBytes(tag(nil, 1, protowire.BytesType), nil)
	var msgs [][]byte
	for _, v := range values {
		val := protowire.AppendBytes(tag(nil, 2, protowire.BytesType), v)
		msgs = append(msgs,
			any(key, val), any(val, key), any(emptyKey, val), any(val), any(key),
			any(key, val, val), any(val, key, key), any(key, key, val),
			any(key, val, strindex), // a trailing field of KeyValue
			any(key, val)[:len(any(key, val))-1],
		)
	}
	return msgs
}

// TestKeyValueFast: the fast form reads a KeyValue as the field-by-field
// reader does, and leaves every other form to it.
func TestKeyValueFast(t *testing.T) {
	hits := 0
	for _, msg := range kvMessages() {
		fast, fields := keyValueBoth(msg)
		if fast != fields {
			t.Errorf("%x: %s, field by field %s", msg, fast, fields)
		}
		if _, _, ok := pbKeyValueFast(msg); ok {
			hits++
		}
	}
	if hits < 10 {
		t.Errorf("the fast form read %d messages, want the 12 simple ones at least", hits)
	}
}

func FuzzKeyValueFast(f *testing.F) {
	for _, msg := range kvMessages() {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if fast, fields := keyValueBoth(msg); fast != fields {
			t.Errorf("%x: %s, field by field %s", msg, fast, fields)
		}
	})
}
