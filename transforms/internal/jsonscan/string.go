package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// ReadString consumes a string value and returns its unescaped contents.
// If the string contains no escape sequences the result is a sub-slice of
// the input; otherwise it lives in the Iter's scratch buffer. Either way it
// is valid only until the next method call. A value of another kind,
// control characters, invalid escapes and invalid UTF-8 are errors. Lone
// surrogates written as \u escapes become U+FFFD.
func (it *Iter) ReadString() []byte {
	if it.err != nil {
		return nil
	}
	i := skipWS(it.buf, it.pos)
	it.pos = i
	if i >= len(it.buf) || it.buf[i] != '"' {
		it.failType(i, "string")
		return nil
	}
	s, end, esc := it.parseString(i, it.scratch[:0])
	if end < 0 {
		return nil
	}
	if esc {
		it.scratch = s
	}
	it.pos = end
	return s
}

// ReadStringInto consumes a string value like ReadString, appends its
// unescaped contents to dst and returns the extended slice. On error dst
// is returned unchanged.
func (it *Iter) ReadStringInto(dst []byte) []byte {
	if it.err != nil {
		return dst
	}
	i := skipWS(it.buf, it.pos)
	it.pos = i
	if i >= len(it.buf) || it.buf[i] != '"' {
		it.failType(i, "string")
		return dst
	}
	s, end, esc := it.parseString(i, dst)
	if end < 0 {
		return dst
	}
	it.pos = end
	if esc {
		return s
	}
	return append(dst, s...)
}

// parseString parses the string whose opening quote is at buf[start]. If it
// has no escapes it returns the raw contents (a sub-slice of the input) and
// escaped == false; otherwise it appends the unescaped contents to dst and
// returns that with escaped == true. end is the offset just past the
// closing quote, or -1 after an error has been recorded.
func (it *Iter) parseString(start int, dst []byte) (s []byte, end int, escaped bool) {
	buf := it.buf
	i := start + 1
	for {
		i = scanPlain(buf, i)
		if i >= len(buf) {
			it.fail(len(buf), "unexpected end of input in string")
			return nil, -1, false
		}
		switch c := buf[i]; {
		case c == '"':
			return buf[start+1 : i], i + 1, false
		case c == '\\':
			return it.parseEscaped(i, append(dst, buf[start+1:i]...))
		case c < 0x20:
			it.fail(i, "invalid control character in string")
			return nil, -1, false
		default:
			if i = it.skipUTF8(i); i < 0 {
				return nil, -1, false
			}
		}
	}
}

// parseEscaped continues parseString from the first backslash at buf[i],
// appending unescaped contents to dst.
func (it *Iter) parseEscaped(i int, dst []byte) ([]byte, int, bool) {
	buf := it.buf
	for {
		if i >= len(buf) {
			it.fail(len(buf), "unexpected end of input in string")
			return nil, -1, false
		}
		switch c := buf[i]; {
		case c == '"':
			return dst, i + 1, true
		case c == '\\':
			if i+1 >= len(buf) {
				it.fail(len(buf), "unexpected end of input in string")
				return nil, -1, false
			}
			e := buf[i+1]
			if e != 'u' {
				d := unescapeTable[e]
				if d == 0 {
					it.fail(i, "invalid escape sequence in string")
					return nil, -1, false
				}
				dst = append(dst, d)
				i += 2
				break
			}
			r, ok := hex4(buf, i+2)
			if !ok {
				it.fail(i, "invalid \\u escape in string")
				return nil, -1, false
			}
			i += 6
			if r >= 0xD800 && r < 0xE000 {
				// A surrogate: valid only as a high half followed by an
				// escaped low half. Anything else becomes U+FFFD, and a
				// following escape is decoded on its own (as encoding/json).
				lo, ok := rune(0), false
				if r < 0xDC00 && i+1 < len(buf) && buf[i] == '\\' && buf[i+1] == 'u' {
					lo, ok = hex4(buf, i+2)
					ok = ok && lo >= 0xDC00 && lo < 0xE000
				}
				if ok {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		case c < 0x20:
			it.fail(i, "invalid control character in string")
			return nil, -1, false
		default: // non-ASCII
			j := it.skipUTF8(i)
			if j < 0 {
				return nil, -1, false
			}
			dst = append(dst, buf[i:j]...)
			i = j
		}
		j := scanPlain(buf, i)
		dst = append(dst, buf[i:j]...)
		i = j
	}
}

// skipString validates the string whose opening quote is at buf[start] and
// returns the offset just past its closing quote, or -1 after recording an
// error. Nothing is copied.
func (it *Iter) skipString(start int) int {
	buf := it.buf
	i := start + 1
	for {
		i = scanPlain(buf, i)
		if i >= len(buf) {
			it.fail(len(buf), "unexpected end of input in string")
			return -1
		}
		switch c := buf[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(buf) {
				it.fail(len(buf), "unexpected end of input in string")
				return -1
			}
			if e := buf[i+1]; e == 'u' {
				if _, ok := hex4(buf, i+2); !ok {
					it.fail(i, "invalid \\u escape in string")
					return -1
				}
				i += 6
			} else if unescapeTable[e] != 0 {
				i += 2
			} else {
				it.fail(i, "invalid escape sequence in string")
				return -1
			}
		case c < 0x20:
			it.fail(i, "invalid control character in string")
			return -1
		default:
			if i = it.skipUTF8(i); i < 0 {
				return -1
			}
		}
	}
}

// skipUTF8 validates the run of non-ASCII bytes starting at buf[i] and
// returns the offset just past it, or -1 after recording an error at the
// first invalid byte. A run ends at an ASCII byte, which can never be part
// of a multi-byte sequence, so validating runs separately is exact.
func (it *Iter) skipUTF8(i int) int {
	buf := it.buf
	j := i + 1
	for j < len(buf) && buf[j] >= utf8.RuneSelf {
		j++
	}
	if utf8.Valid(buf[i:j]) {
		return j
	}
	for i < j {
		r, n := utf8.DecodeRune(buf[i:j])
		if r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	it.fail(i, "invalid UTF-8 in string")
	return -1
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// scanPlain returns the offset of the first byte at or after i that needs
// attention inside a string ('"', '\\', a control character or a non-ASCII
// byte), or len(buf). It examines eight bytes at a time.
func scanPlain(buf []byte, i int) int {
	for i+8 <= len(buf) {
		x := binary.LittleEndian.Uint64(buf[i:])
		// The high bit of a byte is set in m if the byte is < 0x20 (the
		// first subtraction borrows), '"' or '\\' (the xor-ed byte is zero
		// and borrows), or >= 0x80: then both xor-ed bytes are >= 0x80 and
		// at most one of them is exactly 0x80, so the other keeps its high
		// bit after subtracting 1. Borrows only start at hits and only
		// propagate to more significant bytes, i.e. later in the input, so
		// the lowest flagged byte is always the first true hit.
		m := (x - lsb*0x20) | ((x ^ (lsb * '"')) - lsb) | ((x ^ (lsb * '\\')) - lsb)
		if m &= msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(buf) && plainByte[buf[i]] {
		i++
	}
	return i
}

// hex4 decodes four hex digits at buf[i:i+4].
func hex4(buf []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(buf) {
		return 0, false
	}
	var r rune
	for _, c := range buf[i : i+4] {
		v := hexTable[c]
		if v == 0xff {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// plainByte marks bytes that can be copied verbatim inside a string.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescapeTable maps the byte after a backslash to the byte it denotes, or
// 0 if the escape is invalid ('u' is handled separately).
var unescapeTable = [256]byte{
	'"': '"', '\\': '\\', '/': '/',
	'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// hexTable maps hex digits to their value and every other byte to 0xff.
var hexTable = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
		t[c-'a'+'A'] = c - 'a' + 10
	}
	return t
}()
