package jsonscan

// Skip consumes the next value of any kind, validating it completely
// (including nested objects and arrays, strings and numbers). Nesting is
// limited to 10000 levels in total, counting containers opened with
// ObjectStart and ArrayStart; deeper input is an error. Skip is iterative
// and never recurses.
func (it *Iter) Skip() {
	it.skip()
}

// Raw consumes the next value like Skip and returns its raw bytes, a
// sub-slice of the input without surrounding whitespace. It returns nil on
// error.
func (it *Iter) Raw() []byte {
	start, end := it.skip()
	if end < 0 {
		return nil
	}
	return it.buf[start:end]
}

// skip consumes one value, returning its bounds; end is -1 on error.
func (it *Iter) skip() (start, end int) {
	if it.err != nil {
		return 0, -1
	}
	buf := it.buf
	i := skipWS(buf, it.pos)
	it.pos = i
	if i >= len(buf) {
		it.failType(i, "value")
		return i, -1
	}
	switch buf[i] {
	case '"':
		end = it.skipString(i)
	case '{', '[':
		end = it.skipContainer(i)
	case 't', 'f', 'n':
		end = it.skipLiteral(i)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		end = it.scanNumber(i)
	default:
		it.failType(i, "value")
		return i, -1
	}
	if end >= 0 {
		it.pos = end
	}
	return i, end
}

// skipLiteral validates the literal true, false or null at buf[i] and
// returns the offset just past it, or -1 after recording an error.
func (it *Iter) skipLiteral(i int) int {
	buf := it.buf
	var lit string
	switch buf[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	default:
		lit = "null"
	}
	end := i + len(lit)
	if end <= len(buf) && string(buf[i:end]) == lit && (end == len(buf) || !wordChar[buf[end]]) {
		return end
	}
	it.fail(i, "invalid literal")
	return -1
}

// skipContainer validates the object or array whose opening bracket is at
// buf[i] and returns the offset just past its closing bracket, or -1 after
// recording an error. It keeps an explicit stack of container kinds (one
// bit per level: 1 = object) instead of recursing.
func (it *Iter) skipContainer(i int) int {
	buf := it.buf
	base := it.depth
	depth := 0     // levels opened by this call
	var low uint64 // kind bits for levels 0..63
	var obj bool   // kind of the innermost open level
	var c byte

open: // buf[i] is '{' or '['
	if base+depth >= maxDepth {
		it.fail(i, "exceeded maximum nesting depth")
		return -1
	}
	obj = buf[i] == '{'
	if depth < 64 {
		if obj {
			low |= 1 << depth
		} else {
			low &^= 1 << depth
		}
	} else {
		it.setDeep(depth-64, obj)
	}
	depth++
	i = skipWS(buf, i+1)
	if i >= len(buf) {
		it.fail(i, "unexpected end of input")
		return -1
	}
	if obj {
		if buf[i] == '}' {
			i++
			goto closed
		}
		goto member
	}
	if buf[i] == ']' {
		i++
		goto closed
	}
	goto value

member: // a key is expected at buf[i]
	if i >= len(buf) || buf[i] != '"' {
		it.failExpect(i, "expected string key")
		return -1
	}
	if i = it.skipString(i); i < 0 {
		return -1
	}
	i = skipWS(buf, i)
	if i >= len(buf) || buf[i] != ':' {
		it.failExpect(i, "expected ':' after object key")
		return -1
	}
	i = skipWS(buf, i+1)

value: // a value is expected at buf[i]
	if i >= len(buf) {
		it.fail(i, "unexpected end of input, expected value")
		return -1
	}
	switch buf[i] {
	case '{', '[':
		goto open
	case '"':
		i = it.skipString(i)
	case 't', 'f', 'n':
		i = it.skipLiteral(i)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		i = it.scanNumber(i)
	default:
		it.failType(i, "value")
		return -1
	}
	if i < 0 {
		return -1
	}

next: // a value of the innermost container has just ended at buf[i-1]
	i = skipWS(buf, i)
	if i >= len(buf) {
		it.fail(i, "unexpected end of input")
		return -1
	}
	if d := depth - 1; d < 64 {
		obj = low>>d&1 != 0
	} else {
		obj = it.isDeepObject(d - 64)
	}
	c = buf[i]
	if c == ',' {
		i = skipWS(buf, i+1)
		if obj {
			goto member
		}
		goto value
	}
	if obj {
		if c != '}' {
			it.failExpect(i, "expected ',' or '}' after object member")
			return -1
		}
	} else if c != ']' {
		it.failExpect(i, "expected ',' or ']' after array element")
		return -1
	}
	i++

closed: // the innermost container has just been closed
	depth--
	if depth == 0 {
		return i
	}
	goto next
}

// setDeep records the kind of nesting level 64+d in it.deep.
func (it *Iter) setDeep(d int, obj bool) {
	w := d >> 6
	for len(it.deep) <= w {
		it.deep = append(it.deep, 0)
	}
	if obj {
		it.deep[w] |= 1 << (d & 63)
	} else {
		it.deep[w] &^= 1 << (d & 63)
	}
}

// isDeepObject reports whether nesting level 64+d is an object.
func (it *Iter) isDeepObject(d int) bool {
	w := d >> 6
	return w < len(it.deep) && it.deep[w]>>(d&63)&1 != 0
}
