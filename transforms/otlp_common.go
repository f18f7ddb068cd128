package transforms

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms/internal/jsonscan"
)

type jsonIter = jsonscan.Iter

const jsonKindString = jsonscan.String

// appendID appends an OTLP trace or span id as lower-case hex; an absent or
// all-zero id (invalid by the spec) is NULL.
func appendID(c *shred.Column, id []byte) {
	zero := true
	for _, b := range id {
		if b != 0 {
			zero = false
			break
		}
	}
	if zero {
		c.AppendNull()
		return
	}
	var buf [32]byte
	n := hex.Encode(buf[:], id)
	c.AppendBytes(buf[:n])
}

// decodeID decodes a JSON trace or span id of size bytes into dst[:size]:
// hex in any case (the OTLP/JSON spec) or base64, standard or URL-safe,
// padded or not (what protojson producers write). An empty string is an
// absent id (nil result).
func decodeID(dst []byte, s []byte, size int) ([]byte, error) {
	if len(s) == 0 {
		return nil, nil
	}
	if len(s) == 2*size {
		if _, err := hex.Decode(dst[:size], s); err == nil {
			return dst[:size], nil
		}
	}
	if len(s) == base64.StdEncoding.EncodedLen(size) || len(s) == base64.RawStdEncoding.EncodedLen(size) {
		var buf [24]byte
		if raw, err := decodeBase64(buf[:0], s); err == nil && len(raw) == size {
			return dst[:copy(dst[:size], raw)], nil
		}
	}
	return nil, fmt.Errorf("id %q is neither %d hex digits nor base64 of %d bytes", truncate(s, 64), 2*size, size)
}

func truncate(s []byte, n int) []byte {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// attrSet holds the attributes of a resource or scope while its records are
// parsed, to be filled into their rows afterwards. Keys and values are
// copied into one arena that is reused.
type attrSet struct {
	arena []byte
	kvs   []storedKV
}

type storedKV struct {
	k0, k1 int
	v      shred.Value
	v0, v1 int
}

func (a *attrSet) reset() {
	a.arena = a.arena[:0]
	a.kvs = a.kvs[:0]
}

func (a *attrSet) add(key []byte, v shred.Value) {
	kv := storedKV{k0: len(a.arena)}
	a.arena = append(a.arena, key...)
	kv.k1 = len(a.arena)
	kv.v0 = len(a.arena)
	a.arena = append(a.arena, v.Bytes...)
	kv.v1 = len(a.arena)
	v.Bytes = nil
	kv.v = v
	a.kvs = append(a.kvs, kv)
}

// find returns the string value of key, if present.
func (a *attrSet) find(key string) (string, bool) {
	for i := len(a.kvs) - 1; i >= 0; i-- {
		kv := a.kvs[i]
		if string(a.arena[kv.k0:kv.k1]) == key && kv.v.Kind == shred.String {
			return string(a.arena[kv.v0:kv.v1]), true
		}
	}
	return "", false
}

// fill sets every attribute at level for rows [from, to).
func (a *attrSet) fill(b *shred.Batch, level shred.Level, from, to int) {
	for _, kv := range a.kvs {
		v := kv.v
		if v.Kind == shred.String || v.Kind == shred.Blob || v.Kind == shred.JSON {
			v.Bytes = a.arena[kv.v0:kv.v1]
		}
		b.FillAttr(level, a.arena[kv.k0:kv.k1], from, to, v)
	}
}

// appendJSONObject appends the attributes as one JSON object, or nothing
// (returns dst unchanged, ok false) when there are none.
func (a *attrSet) appendJSONObject(dst []byte) ([]byte, bool) {
	if len(a.kvs) == 0 {
		return dst, false
	}
	dst = append(dst, '{')
	for i, kv := range a.kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = shred.AppendJSONString(dst, a.arena[kv.k0:kv.k1])
		dst = append(dst, ':')
		v := kv.v
		v.Bytes = a.arena[kv.v0:kv.v1]
		dst = shred.AppendJSON(dst, v)
	}
	return append(dst, '}'), true
}

// scopeInfo is what a resource or scope contributes to each of its rows.
type scopeInfo struct {
	name, version, schemaURL string
	dropped                  uint32
	attrs                    attrSet
}

func (s *scopeInfo) reset() {
	s.name, s.version, s.schemaURL, s.dropped = "", "", "", 0
	s.attrs.reset()
}

// blockCols are the indices of the core columns that come from a record's
// resource and scope; they are filled once per block, after its records.
type blockCols struct {
	service, resURL, resDropped                     int
	scopeName, scopeVersion, scopeURL, scopeDropped int
}

// fillScope fills the scope columns and attributes of rows [from, b.Rows).
func (bc *blockCols) fillScope(b *shred.Batch, s *scopeInfo, from int) {
	n := b.Rows - from
	c := b.Core
	if !b.Reserve(n * (len(s.name) + len(s.version) + len(s.schemaURL) + 4*8)) {
		return // the decoder fails with b.Err()
	}
	c[bc.scopeName].AppendStringN(s.name, n)
	c[bc.scopeVersion].AppendStringN(s.version, n)
	c[bc.scopeURL].AppendStringN(s.schemaURL, n)
	c[bc.scopeDropped].AppendIntN(int64(s.dropped), n)
	s.attrs.fill(b, shred.Scope, from, b.Rows)
}

// fillResource fills the resource columns and attributes of rows [from, b.Rows).
func (bc *blockCols) fillResource(b *shred.Batch, r *scopeInfo, from int) {
	n := b.Rows - from
	c := b.Core
	r.name, _ = r.attrs.find("service.name")
	if !b.Reserve(n * (len(r.name) + len(r.schemaURL) + 3*8)) {
		return // the decoder fails with b.Err()
	}
	c[bc.service].AppendStringN(r.name, n)
	c[bc.resURL].AppendStringN(r.schemaURL, n)
	c[bc.resDropped].AppendIntN(int64(r.dropped), n)
	r.attrs.fill(b, shred.Resource, from, b.Rows)
}

// decodeBase64 decodes standard (or URL-safe, padded or not) base64.
func decodeBase64(dst, s []byte) ([]byte, error) {
	for _, enc := range [...]*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if out, err := enc.AppendDecode(dst[:0], s); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("invalid base64 %q", truncate(s, 64))
}

// otlpOverflow names the JSON overflow column of each attribute level of
// the OTLP tables.
var otlpOverflow = [shred.NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}

// withOverflowMaps returns core followed by the overflow maps of the OTLP
// levels (shred.OverflowMaps), which a transform leaves NULL.
func withOverflowMaps(core []shred.CoreColumn) []shred.CoreColumn {
	return append(core[:len(core):len(core)], shred.OverflowMaps(otlpOverflow)...)
}
