package jsonscan

import "strconv"

// Kind is the kind of the next JSON value, as reported by Iter.Next.
type Kind uint8

// The kinds of JSON values.
const (
	// Invalid reports that no value can start here: end of input, a
	// recorded error, or a byte that cannot begin a JSON value.
	Invalid Kind = iota
	// String is a JSON string.
	String
	// Number is a JSON number.
	Number
	// Bool is the literal true or false.
	Bool
	// Null is the literal null.
	Null
	// Object is a JSON object.
	Object
	// Array is a JSON array.
	Array
)

var kindNames = [...]string{"invalid", "string", "number", "bool", "null", "object", "array"}

// String returns the lower-case name of the kind, e.g. "object".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// maxDepth is the maximum nesting depth of objects and arrays, matching
// encoding/json: 10000 nested containers are accepted, 10001 are not.
const maxDepth = 10000

// SyntaxError describes malformed input (or an error recorded with
// Iter.ReportError) together with the byte offset where it was detected.
type SyntaxError struct {
	Offset int    // byte offset into the input
	Msg    string // description of the problem
}

// Error returns the message in the form "jsonscan: offset N: reason".
func (e *SyntaxError) Error() string {
	return "jsonscan: offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Iter is a pull-style JSON iterator over a byte slice.
//
// The zero value is an iterator over empty input; call Reset to start on a
// document. Values are consumed with the Read*, Skip and Raw methods;
// objects are walked with ObjectStart and NextKey, arrays with ArrayStart
// and NextElem:
//
//	if it.ObjectStart() {
//		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
//			switch string(key) {
//			case "name":
//				name = string(it.ReadString())
//			default:
//				it.Skip()
//			}
//		}
//	}
//	if err := it.Err(); err != nil { ... }
//
// The first error is recorded and kept; after it every method returns zero
// values (or false) and consumes nothing, so callers may check Err once at
// the end. No method panics, whatever the input.
//
// Byte slices returned by ReadString, NextKey, ReadNumberRaw and Raw point
// into the input or into a scratch buffer owned by the Iter; they are valid
// only until the next method call.
//
// Differences from encoding/json: invalid UTF-8 inside strings (including
// UTF-8-encoded surrogate halves) is an error, where encoding/json accepts
// it and substitutes U+FFFD; lone surrogates written as \u escapes are
// replaced by U+FFFD exactly as encoding/json does. A number must not be
// followed directly by a letter, digit, '.', '+', '-' or '_' (so "01" or
// "1.5.2" are errors even between top-level values) and the same holds for
// the literals true, false and null.
type Iter struct {
	buf      []byte
	pos      int
	err      error
	scratch  []byte   // unescaped strings; reused
	depth    int      // containers opened by ObjectStart/ArrayStart, not yet closed
	elemMark int      // 1 + offset of the element NextElem last announced as first
	deep     []uint64 // Skip's container-kind bits beyond 64 levels; reused
}

// Reset starts the iterator on a new input, clearing any error. The
// capacity of the internal scratch buffer is kept.
func (it *Iter) Reset(buf []byte) {
	it.buf = buf
	it.pos = 0
	it.err = nil
	it.scratch = it.scratch[:0]
	it.depth = 0
	it.elemMark = 0
}

// Err returns the first error encountered (or reported), or nil. A non-nil
// error is always a *SyntaxError.
func (it *Iter) Err() error {
	return it.err
}

// Offset returns the current byte offset into the input.
func (it *Iter) Offset() int {
	return it.pos
}

// ReportError records a caller-detected (for example semantic) error at
// offset with the given message. If an error was already recorded, the
// first one wins and this call does nothing.
func (it *Iter) ReportError(offset int, msg string) {
	it.fail(offset, msg)
}

// Next skips whitespace and reports the kind of the next value without
// consuming it. It returns Invalid at the end of input (which is not an
// error by itself), after an error, or when the next byte cannot start a
// value (the error is then reported by whichever method tries to read it).
func (it *Iter) Next() Kind {
	if it.err != nil {
		return Invalid
	}
	i := skipWS(it.buf, it.pos)
	it.pos = i
	if i >= len(it.buf) {
		return Invalid
	}
	return kindTable[it.buf[i]]
}

// More skips whitespace and reports whether any non-whitespace input
// remains. It is used to read several concatenated top-level values:
//
//	for it.More() { decodeOne(&it) }
//
// More returns false after an error.
func (it *Iter) More() bool {
	if it.err != nil {
		return false
	}
	i := skipWS(it.buf, it.pos)
	it.pos = i
	return i < len(it.buf)
}

// ObjectStart consumes the '{' that starts an object. If the next value is
// not an object it records an error and returns false. Follow it with
// NextKey calls until NextKey returns false.
func (it *Iter) ObjectStart() bool {
	return it.containerStart('{', "object")
}

// ArrayStart consumes the '[' that starts an array. If the next value is
// not an array it records an error and returns false. Follow it with
// NextElem calls until NextElem returns false.
func (it *Iter) ArrayStart() bool {
	return it.containerStart('[', "array")
}

func (it *Iter) containerStart(open byte, want string) bool {
	if it.err != nil {
		return false
	}
	i := skipWS(it.buf, it.pos)
	it.pos = i
	if i >= len(it.buf) || it.buf[i] != open {
		it.failType(i, want)
		return false
	}
	if it.depth >= maxDepth {
		it.fail(i, "exceeded maximum nesting depth")
		return false
	}
	it.depth++
	it.pos = i + 1
	return true
}

// NextKey is called after ObjectStart (and after each member's value has
// been consumed). It handles the separating comma, returns the next
// member's key, unescaped, and consumes the ':' after it; the member's value
// is next. At the closing '}' it consumes it and returns false; on an error
// it returns false too (check Err). The key is valid only until the next
// method call.
func (it *Iter) NextKey() ([]byte, bool) {
	if it.err != nil {
		return nil, false
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) {
		it.fail(i, "unexpected end of input in object")
		return nil, false
	}
	c := buf[i]
	if c == '}' {
		if it.depth <= 0 {
			it.fail(i, "unexpected '}' outside an object")
			return nil, false
		}
		it.depth--
		it.pos = i + 1
		return nil, false
	}
	if !afterOpen(buf, i, '{') {
		if c != ',' {
			it.failExpect(i, "expected ',' or '}' after object member")
			return nil, false
		}
		i = skipWS(buf, i+1)
		if i >= len(buf) || buf[i] != '"' {
			it.failExpect(i, "expected string key after ','")
			return nil, false
		}
	} else if c != '"' {
		it.failExpect(i, "expected string key or '}'")
		return nil, false
	}
	key, end, esc := it.parseString(i, it.scratch[:0])
	if end < 0 {
		return nil, false
	}
	if esc {
		it.scratch = key
	}
	i = skipWS(buf, end)
	if i >= len(buf) || buf[i] != ':' {
		it.failExpect(i, "expected ':' after object key")
		return nil, false
	}
	i = skipWS(buf, i+1)
	if i >= len(buf) || kindTable[buf[i]] == Invalid {
		it.failExpect(i, "expected value after ':'")
		return nil, false
	}
	it.pos = i
	return key, true
}

// NextElem is called after ArrayStart (and after each element has been
// consumed). It handles the separating comma and returns true if another
// element follows; that element is next. At the closing ']' it consumes it
// and returns false; on an error it returns false too (check Err).
//
// Every element announced by NextElem must be consumed (read, Skip or Raw)
// before NextElem is called again; otherwise an error is recorded.
func (it *Iter) NextElem() bool {
	if it.err != nil {
		return false
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) {
		it.fail(i, "unexpected end of input in array")
		return false
	}
	c := buf[i]
	if c == ']' {
		if it.depth <= 0 {
			it.fail(i, "unexpected ']' outside an array")
			return false
		}
		it.depth--
		it.pos = i + 1
		return false
	}
	if afterOpen(buf, i, '[') {
		// First element. Guard against a caller that never consumes it,
		// which would otherwise make NextElem return true forever.
		if it.elemMark == i+1 {
			it.fail(i, "array element was not consumed")
			return false
		}
	} else {
		if c != ',' {
			it.failExpect(i, "expected ',' or ']' after array element")
			return false
		}
		i = skipWS(buf, i+1)
	}
	if i >= len(buf) || kindTable[buf[i]] == Invalid {
		it.failExpect(i, "expected array element")
		return false
	}
	it.pos = i
	it.elemMark = i + 1
	return true
}

// ReadNull consumes the next value and returns true if it is null.
// Otherwise it consumes nothing and returns false; an error is recorded
// only if the input there is a malformed literal starting with 'n'.
func (it *Iter) ReadNull() bool {
	if it.err != nil {
		return false
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) || buf[i] != 'n' {
		return false
	}
	if i+4 <= len(buf) && string(buf[i:i+4]) == "null" && (i+4 == len(buf) || !wordChar[buf[i+4]]) {
		it.pos = i + 4
		return true
	}
	it.fail(i, "invalid literal")
	return false
}

// ReadBool consumes and returns a true or false literal. Any other value is
// an error (and false is returned).
func (it *Iter) ReadBool() bool {
	if it.err != nil {
		return false
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i < len(buf) {
		switch buf[i] {
		case 't':
			if i+4 <= len(buf) && string(buf[i:i+4]) == "true" && (i+4 == len(buf) || !wordChar[buf[i+4]]) {
				it.pos = i + 4
				return true
			}
			it.fail(i, "invalid literal")
			return false
		case 'f':
			if i+5 <= len(buf) && string(buf[i:i+5]) == "false" && (i+5 == len(buf) || !wordChar[buf[i+5]]) {
				it.pos = i + 5
				return false
			}
			it.fail(i, "invalid literal")
			return false
		}
	}
	it.failType(i, "bool")
	return false
}

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(buf []byte, i int) int {
	for i < len(buf) {
		c := buf[i]
		if c > ' ' || wsMask>>c&1 == 0 {
			return i
		}
		i++
	}
	return i
}

// wsMask has bit c set for each JSON whitespace byte c.
const wsMask uint64 = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'

// afterOpen reports whether the last non-whitespace byte before i is open,
// i.e. whether the container opened there has had no member yet. Values
// never end in '{' or '[', so this is exact for well-behaved callers.
func afterOpen(buf []byte, i int, open byte) bool {
	j := i - 1
	for j >= 0 && j < len(buf) && buf[j] <= ' ' && wsMask>>buf[j]&1 != 0 {
		j--
	}
	return j >= 0 && j < len(buf) && buf[j] == open
}

func (it *Iter) fail(off int, msg string) {
	if it.err == nil {
		it.err = &SyntaxError{Offset: off, Msg: msg}
	}
}

// failExpect records "<what>, found <byte>" (or an end-of-input variant).
func (it *Iter) failExpect(off int, what string) {
	if off >= len(it.buf) {
		it.fail(off, "unexpected end of input, "+what)
		return
	}
	it.fail(off, what+", found "+describeByte(it.buf[off]))
}

// failType records that a value of kind want was expected at off.
func (it *Iter) failType(off int, want string) {
	if off >= len(it.buf) {
		it.fail(off, "unexpected end of input, expected "+want)
		return
	}
	c := it.buf[off]
	if k := kindTable[c]; k != Invalid {
		it.fail(off, "expected "+want+", found "+k.String())
		return
	}
	it.fail(off, "invalid character "+describeByte(c)+" looking for beginning of value")
}

func describeByte(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c >= 0x20 && c < 0x7f:
		return "'" + string(rune(c)) + "'"
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

// kindTable maps the first byte of a value to its Kind.
var kindTable = [256]Kind{
	'"': String,
	'-': Number, '0': Number, '1': Number, '2': Number, '3': Number,
	'4': Number, '5': Number, '6': Number, '7': Number, '8': Number, '9': Number,
	't': Bool, 'f': Bool,
	'n': Null,
	'{': Object,
	'[': Array,
}

// wordChar marks bytes that may not directly follow a number or a literal:
// letters, digits, '_', '.', '+' and '-'.
var wordChar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['_'], t['.'], t['+'], t['-'] = true, true, true, true
	return t
}()
