package pgwire

import (
	"strconv"
	"strings"
)

// segment is a kind of text lexSQL cuts SQL into.
type segment int

const (
	segCode    segment = iota
	segQuoted          // '...', E'...', "...", $tag$...$tag$
	segComment         // -- and nested /* */
)

// lexSQL calls emit with the whole of text in order, cut into code,
// quoted text and comments. It reads as PostgreSQL and DuckDB lex; text
// left open at the end is quoted text or a comment to the end.
func lexSQL(text string, emit func(kind segment, s string)) {
	start := 0 // where the current run of code began
	for i := 0; i < len(text); {
		c := text[i]
		kind, j := segCode, 0
		switch {
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			kind, j = segComment, len(text)
			if k := strings.IndexByte(text[i:], '\n'); k >= 0 {
				j = i + k
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			depth := 1
			kind, j = segComment, i+2
			for j < len(text) && depth > 0 {
				switch {
				case strings.HasPrefix(text[j:], "/*"):
					depth++
					j += 2
				case strings.HasPrefix(text[j:], "*/"):
					depth--
					j += 2
				default:
					j++
				}
			}
		case c == '\'' || c == '"':
			kind, j = segQuoted, i+1
			for j < len(text) {
				if text[j] == c {
					if j+1 < len(text) && text[j+1] == c {
						j += 2
						continue
					}
					break
				}
				if c == '\'' && text[j] == '\\' && i > 0 && (text[i-1] == 'e' || text[i-1] == 'E') {
					j++
				}
				j++
			}
			j = min(j+1, len(text))
		case c == '$':
			// $1 is a parameter; $tag$ opens a string.
			k := i + 1
			for k < len(text) && (text[k] == '_' || isAlnum(text[k])) {
				k++
			}
			if k < len(text) && text[k] == '$' && (k == i+1 || !isDigit(text[i+1])) {
				tag := text[i : k+1]
				kind, j = segQuoted, len(text)
				if end := strings.Index(text[k+1:], tag); end >= 0 {
					j = k + 1 + end + len(tag)
				}
				break
			}
			i = k
			continue
		default:
			i++
			continue
		}
		if i > start {
			emit(segCode, text[start:i])
		}
		emit(kind, text[i:j])
		i, start = j, j
	}
	if start < len(text) {
		emit(segCode, text[start:])
	}
}

// scanSQL returns text with its comments replaced by spaces, and whether
// it holds more than one statement: a semicolon outside quotes followed
// by anything but spaces and semicolons.
func scanSQL(text string) (clean string, multi bool) {
	var b strings.Builder
	b.Grow(len(text))
	ended := false // a statement ended with ';'
	lexSQL(text, func(kind segment, s string) {
		switch kind {
		case segComment:
			b.WriteByte(' ')
			return
		case segQuoted:
			multi = multi || ended
		case segCode:
			for i := 0; i < len(s); i++ {
				switch s[i] {
				case ';':
					ended = true
				case ' ', '\t', '\n', '\r', '\f':
				default:
					multi = multi || ended
				}
			}
		}
		b.WriteString(s)
	})
	return b.String(), multi
}

// mapCode returns sql with f applied to its runs of code, its quoted text
// and comments kept: a rewrite of PostgreSQL's spellings never changes a
// string's value.
func mapCode(sql string, f func(code string) string) string {
	var b strings.Builder
	b.Grow(len(sql))
	lexSQL(sql, func(kind segment, s string) {
		if kind == segCode {
			s = f(s)
		}
		b.WriteString(s)
	})
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

// trimStatement strips spaces and trailing semicolons.
func trimStatement(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), "; \t\n\r\f")
}

// eachParam calls f for each parameter $n in code: its bytes [i, k) and n.
func eachParam(code string, f func(i, k, n int)) {
	for i := 0; i < len(code); i++ {
		if code[i] != '$' || (i > 0 && (code[i-1] == '_' || isAlnum(code[i-1]))) {
			continue
		}
		k := i + 1
		for k < len(code) && isDigit(code[k]) {
			k++
		}
		if n, err := strconv.Atoi(code[i+1 : k]); err == nil {
			f(i, k, n)
		}
		i = k - 1
	}
}

// castParams returns sql with each parameter $n in casts (n from 1)
// replaced by CAST($n AS casts[n]), in code only; the type of a cast
// written after it wins ($1::INTEGER is an INTEGER parameter, as in
// PostgreSQL).
func castParams(sql string, casts map[int]string) string {
	return mapCode(sql, func(code string) string {
		var b strings.Builder
		last := 0
		eachParam(code, func(i, k, n int) {
			t, ok := casts[n]
			if !ok {
				return
			}
			if typed := castType(code[k:]); typed != "" {
				t = typed
			}
			b.WriteString(code[last:i] + "CAST(" + code[i:k] + " AS " + t + ")")
			last = k
		})
		return b.String() + code[last:]
	})
}

// paramCasts returns, for the parameters written with a cast ($1::INT),
// the type of their first one.
func paramCasts(sql string) map[int]string {
	out := map[int]string{}
	lexSQL(sql, func(kind segment, code string) {
		if kind != segCode {
			return
		}
		eachParam(code, func(_, k, n int) {
			if _, seen := out[n]; !seen {
				if t := castType(code[k:]); t != "" {
					out[n] = t
				}
			}
		})
	})
	return out
}

// castType returns the type of a cast that code starts with ("::T",
// "::T(p, s)", "::T[]"), or "".
func castType(code string) string {
	rest := strings.TrimLeft(code, " \t\n")
	if !strings.HasPrefix(rest, "::") {
		return ""
	}
	rest = strings.TrimLeft(rest[2:], " \t\n")
	k := 0
	for k < len(rest) && (rest[k] == '_' || isAlnum(rest[k])) {
		k++
	}
	if k == 0 || isDigit(rest[0]) {
		return ""
	}
	if k < len(rest) && rest[k] == '(' {
		end := strings.IndexByte(rest[k:], ')')
		if end < 0 || strings.ContainsAny(rest[k:k+end], "'\"$;") {
			return ""
		}
		k += end + 1
	}
	for strings.HasPrefix(rest[k:], "[]") {
		k += 2
	}
	return rest[:k]
}
