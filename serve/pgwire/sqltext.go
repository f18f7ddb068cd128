package pgwire

import (
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
