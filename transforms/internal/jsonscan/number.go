package jsonscan

import (
	"math"
	"strconv"
)

// ReadNumberRaw consumes a number value and returns its raw bytes, validated
// against the JSON number grammar (a sub-slice of the input). Any other
// value is an error.
func (it *Iter) ReadNumberRaw() []byte {
	if it.err != nil {
		return nil
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) || kindTable[buf[i]] != Number {
		it.failType(i, "number")
		return nil
	}
	end := it.scanNumber(i)
	if end < 0 {
		return nil
	}
	it.pos = end
	return buf[i:end]
}

// ReadInt64 consumes an integer value and returns it. The value may be a
// JSON number or a JSON string holding a JSON number (protobuf's JSON
// mapping encodes 64-bit integers as strings); forms such as 1e3 or 5.0 are
// accepted when they denote an exact integer. Fractions, values outside the
// int64 range and other kinds are errors.
func (it *Iter) ReadInt64() int64 {
	neg, mag, start, end, ok := it.readInteger("integer")
	if !ok {
		return 0
	}
	if neg {
		if mag > 1<<63 {
			it.fail(start, "number out of range for int64")
			return 0
		}
		it.pos = end
		return -int64(mag) // wraps correctly for mag == 1<<63
	}
	if mag > math.MaxInt64 {
		it.fail(start, "number out of range for int64")
		return 0
	}
	it.pos = end
	return int64(mag)
}

// ReadUint64 is like ReadInt64 for unsigned integers: negative values
// (other than zero) and values above math.MaxUint64 are errors.
func (it *Iter) ReadUint64() uint64 {
	neg, mag, start, end, ok := it.readInteger("unsigned integer")
	if !ok {
		return 0
	}
	if neg && mag != 0 {
		it.fail(start, "number out of range for uint64")
		return 0
	}
	it.pos = end
	return mag
}

// ReadFloat64 consumes a number value and returns it as the nearest
// float64. The value may also be a JSON string holding a JSON number or one
// of "NaN", "Infinity" and "-Infinity" (protobuf's JSON mapping). Numbers
// whose magnitude overflows float64 are errors (as in encoding/json);
// numbers that underflow become zero.
func (it *Iter) ReadFloat64() float64 {
	if it.err != nil {
		return 0
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) {
		it.failType(i, "number")
		return 0
	}
	var raw []byte
	var end int
	switch buf[i] {
	case '"':
		s, e, esc := it.parseString(i, it.scratch[:0])
		if e < 0 {
			return 0
		}
		if esc {
			it.scratch = s[:0]
		}
		switch string(s) {
		case "NaN":
			it.pos = e
			return math.NaN()
		case "Infinity":
			it.pos = e
			return math.Inf(1)
		case "-Infinity":
			it.pos = e
			return math.Inf(-1)
		}
		if n, ok := numberEnd(s, 0); !ok || n != len(s) {
			it.fail(i, "invalid number in string")
			return 0
		}
		raw, end = s, e
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if end = it.scanNumber(i); end < 0 {
			return 0
		}
		raw = buf[i:end]
	default:
		it.failType(i, "number")
		return 0
	}
	f, ok := parseFloat(raw)
	if !ok {
		it.fail(i, "number out of range for float64")
		return 0
	}
	it.pos = end
	return f
}

// readInteger reads a number or a string holding a number and converts it
// to sign and magnitude. It does not advance it.pos; the caller does after
// its range check. want names the expected value in error messages.
func (it *Iter) readInteger(want string) (neg bool, mag uint64, start, end int, ok bool) {
	if it.err != nil {
		return
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) {
		it.failType(i, want)
		return
	}
	c := buf[i]
	if c == '"' {
		s, e, esc := it.parseString(i, it.scratch[:0])
		if e < 0 {
			return
		}
		if esc {
			it.scratch = s[:0]
		}
		if n, m, k := fastInt(s, 0); k == len(s) {
			return n, m, i, e, true
		}
		if n, good := numberEnd(s, 0); !good || n != len(s) {
			it.fail(i, "invalid number in string")
			return
		}
		var msg string
		if neg, mag, msg = decodeInt(s); msg != "" {
			it.fail(i, msg)
			return
		}
		return neg, mag, i, e, true
	}
	if kindTable[c] != Number {
		it.failType(i, want)
		return
	}
	if n, m, k := fastInt(buf, i); k >= 0 && (k == len(buf) || !wordChar[buf[k]]) {
		return n, m, i, k, true
	}
	// General path: exponents, fractions, long or malformed numbers.
	e := it.scanNumber(i)
	if e < 0 {
		return
	}
	var msg string
	if neg, mag, msg = decodeInt(buf[i:e]); msg != "" {
		it.fail(i, msg)
		return
	}
	return neg, mag, i, e, true
}

// fastInt parses a plain integer -?(0|[1-9][0-9]*) of at most 19 digits
// (which cannot overflow a uint64) at b[i:]. It returns the offset just past
// the digits, or -1 if the input there is not of that form; the caller
// must still check what follows.
func fastInt(b []byte, i int) (neg bool, mag uint64, end int) {
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	j := i
	for j < len(b) && j-i < 19 {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		mag = mag*10 + uint64(d)
		j++
	}
	if j == i || (b[i] == '0' && j-i > 1) || (j < len(b) && isDigit(b[j])) {
		return false, 0, -1
	}
	return neg, mag, j
}

// scanNumber validates the number starting at buf[i] and returns the offset
// just past it, or -1 after recording an error.
func (it *Iter) scanNumber(i int) int {
	end, ok := numberEnd(it.buf, i)
	if ok {
		return end
	}
	if end >= len(it.buf) {
		it.fail(end, "unexpected end of input in number")
	} else {
		it.fail(end, "invalid character "+describeByte(it.buf[end])+" in number")
	}
	return -1
}

// numberEnd matches the JSON number grammar
//
//	-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?
//
// at b[i:]. It returns the offset just past the number and true, or the
// offset of the offending byte and false. A number directly followed by a
// letter, digit, '_', '.', '+' or '-' is rejected.
func numberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && b[i]|0x20 == 'e' {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && wordChar[b[i]] {
		return i, false
	}
	return i, true
}

func isDigit(c byte) bool { return c-'0' <= 9 }

// expLimit bounds parsed decimal exponents; anything larger in magnitude
// is equivalent for our purposes (overflow, underflow or non-integer).
const expLimit = 1 << 30

// parseExp parses the exponent digits (with optional sign) in b.
func parseExp(b []byte) int64 {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	var e int64
	for _, c := range b {
		if e < expLimit {
			e = e*10 + int64(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return e
}

// decodeInt converts a number that matches the JSON grammar to sign and
// magnitude, requiring it to be an exact integer that fits in a uint64.
// msg is non-empty on failure. Zero is returned with neg == false.
func decodeInt(raw []byte) (neg bool, mag uint64, msg string) {
	i := 0
	if raw[0] == '-' {
		neg = true
		i++
	}
	s := i
	for i < len(raw) && isDigit(raw[i]) {
		i++
	}
	intPart := raw[s:i]
	var frac []byte
	if i < len(raw) && raw[i] == '.' {
		i++
		s = i
		for i < len(raw) && isDigit(raw[i]) {
			i++
		}
		frac = raw[s:i]
	}
	var exp int64
	if i < len(raw) { // 'e' or 'E'
		exp = parseExp(raw[i+1:])
	}
	// The digits form D = intPart ++ frac; the value is D * 10^(exp-len(frac)).
	n := len(intPart) + len(frac)
	at := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	first := 0
	for first < n && at(first) == '0' {
		first++
	}
	if first == n {
		return false, 0, ""
	}
	last := n - 1
	for at(last) == '0' {
		last--
	}
	// The value is D[first:last+1] * 10^scale.
	scale := int64(n-1-last) - int64(len(frac)) + exp
	if scale < 0 {
		return neg, 0, "number is not an integer"
	}
	if int64(last-first+1)+scale > 20 {
		return neg, 0, "number out of range"
	}
	for k := first; k <= last; k++ {
		d := uint64(at(k) - '0')
		if mag > (math.MaxUint64-d)/10 {
			return neg, 0, "number out of range"
		}
		mag = mag*10 + d
	}
	for ; scale > 0; scale-- {
		if mag > math.MaxUint64/10 {
			return neg, 0, "number out of range"
		}
		mag *= 10
	}
	return neg, mag, ""
}

// pow10 holds the powers of ten that are exactly representable as float64.
var pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// parseFloat converts a number that matches the JSON grammar to the nearest
// float64. ok is false if it overflows. Numbers with at most 19 digits whose
// mantissa fits in 53 bits and whose decimal exponent is within ±22 are
// converted exactly with one multiplication or division (both operands are
// exact, so IEEE rounding gives the correctly rounded result); everything
// else goes to strconv.ParseFloat.
func parseFloat(raw []byte) (float64, bool) {
	i := 0
	neg := false
	if raw[0] == '-' {
		neg = true
		i++
	}
	var m uint64
	nd := 0
	for i < len(raw) && isDigit(raw[i]) {
		m = m*10 + uint64(raw[i]-'0')
		nd++
		i++
	}
	var e int64
	if i < len(raw) && raw[i] == '.' {
		i++
		for i < len(raw) && isDigit(raw[i]) {
			m = m*10 + uint64(raw[i]-'0')
			nd++
			e--
			i++
		}
	}
	if i < len(raw) {
		e += parseExp(raw[i+1:])
	}
	if nd <= 19 && m <= 1<<53 && e >= -22 && e <= 22 {
		f := float64(m)
		if e < 0 {
			f /= pow10[-e]
		} else {
			f *= pow10[e]
		}
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}
