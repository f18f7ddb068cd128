package pgwire

import (
	"strings"
)

// scanSQL returns text with its comments replaced by spaces, and whether
// it holds more than one statement: a semicolon outside quotes followed
// by anything but spaces and semicolons. It reads as PostgreSQL and
// DuckDB lex: '...' and E'...' strings, "..." identifiers, -- and nested
// /* */ comments, $tag$...$tag$ strings.
func scanSQL(text string) (clean string, multi bool) {
	var b strings.Builder
	b.Grow(len(text))
	ended := false // a statement ended with ';'
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				j = len(text) - i
			}
			b.WriteByte(' ')
			i += j
			continue
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			depth, j := 1, i+2
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
			b.WriteByte(' ')
			i = j
			continue
		case c == ';':
			ended = true
			b.WriteByte(c)
			i++
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			b.WriteByte(c)
			i++
			continue
		}
		if ended {
			multi = true
		}
		switch {
		case c == '\'' || c == '"':
			j := i + 1
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
			b.WriteString(text[i:j])
			i = j
		case c == '$':
			// $1 is a parameter; $tag$ opens a string.
			j := i + 1
			for j < len(text) && (text[j] == '_' || isAlnum(text[j])) {
				j++
			}
			if j < len(text) && text[j] == '$' && (j == i+1 || !isDigit(text[i+1])) {
				tag := text[i : j+1]
				end := strings.Index(text[j+1:], tag)
				if end < 0 {
					b.WriteString(text[i:])
					return b.String(), multi
				}
				k := j + 1 + end + len(tag)
				b.WriteString(text[i:k])
				i = k
				continue
			}
			b.WriteString(text[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), multi
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

// trimStatement strips spaces and trailing semicolons.
func trimStatement(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), "; \t\n\r\f")
}
