package pgwire

import (
	"regexp"
	"strings"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// COPY ... TO STDOUT (psql's \copy, psycopg2's copy_expert) sends a
// query's rows in COPY's text or CSV format; it runs as that SELECT, under
// the same policy and limits. COPY to or from a file stays DuckDB's, which
// refuses it.

// copyFormat is how COPY TO STDOUT writes rows.
type copyFormat struct {
	csv    bool
	header bool
	delim  byte
	null   string
}

var (
	copyToStdout = regexp.MustCompile(`(?is)^copy\s+(.+?)\s+to\s+stdout\b(.*)$`)
	copyTable    = regexp.MustCompile(`(?s)^((?:[\w$]+|"(?:[^"]|"")*")(?:\s*\.\s*(?:[\w$]+|"(?:[^"]|"")*"))*)\s*(?:\((.*)\))?$`)
	copyDelim    = regexp.MustCompile(`(?is)\bdelimiter\s*(?:as\s*)?'([^']|'')'`)
	copyNull     = regexp.MustCompile(`(?is)\bnull\s*(?:as\s*)?'((?:[^']|'')*)'`)
	copyOff      = regexp.MustCompile(`(?is)\bheader\s*(?:false|off|0)\b`)
	copyBinary   = regexp.MustCompile(`(?i)\bbinary\b`)
	copyCSV      = regexp.MustCompile(`(?i)\bcsv\b`)
	copyHeader   = regexp.MustCompile(`(?i)\bheader\b`)
)

// parseCopy reads COPY target TO STDOUT [options] from stmt (comments
// removed, one statement); ok is false for any other COPY. The query is
// the target's SELECT.
func parseCopy(stmt string) (query string, f copyFormat, ok bool, why string) {
	m := copyToStdout.FindStringSubmatch(stmt)
	if m == nil {
		return "", f, false, ""
	}
	target, opts := strings.TrimSpace(m[1]), m[2]
	switch {
	case strings.HasPrefix(target, "(") && strings.HasSuffix(target, ")"):
		query = target[1 : len(target)-1]
	default:
		t := copyTable.FindStringSubmatch(target)
		if t == nil {
			return "", f, false, "COPY takes a table, a table with columns or a (query)"
		}
		cols := "*"
		if strings.TrimSpace(t[2]) != "" {
			cols = t[2]
		}
		query = "SELECT " + cols + " FROM " + t[1]
	}
	if copyBinary.MatchString(opts) {
		return "", f, false, "COPY's binary format is not supported: use text or CSV"
	}
	f.csv = copyCSV.MatchString(opts)
	f.header = f.csv && copyHeader.MatchString(opts) && !copyOff.MatchString(opts)
	f.delim = '\t'
	if f.csv {
		f.delim = ','
	} else {
		f.null = `\N`
	}
	if d := copyDelim.FindStringSubmatch(opts); d != nil {
		f.delim = strings.ReplaceAll(d[1], "''", "'")[0]
	}
	if n := copyNull.FindStringSubmatch(opts); n != nil {
		f.null = strings.ReplaceAll(n[1], "''", "'")
	}
	return query, f, true, ""
}

// appendRow appends one row, vals rendered as text (nil: NULL), and
// its line end.
func (f copyFormat) appendRow(dst []byte, vals [][]byte) []byte {
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, f.delim)
		}
		switch {
		case v == nil:
			dst = append(dst, f.null...)
		case f.csv:
			dst = f.appendCSV(dst, v)
		default:
			dst = f.appendEscaped(dst, v)
		}
	}
	return append(dst, '\n')
}

// appendCSV quotes a field that holds the delimiter, a quote, a line end,
// or nothing (an empty string, told from NULL).
func (f copyFormat) appendCSV(dst, v []byte) []byte {
	quote := len(v) == 0 || string(v) == f.null
	for _, c := range v {
		if c == f.delim || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote {
		return append(dst, v...)
	}
	dst = append(dst, '"')
	for _, c := range v {
		if c == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}

// appendEscaped writes the text format's backslash escapes.
func (f copyFormat) appendEscaped(dst, v []byte) []byte {
	for _, c := range v {
		switch c {
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if c == f.delim {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		}
	}
	return dst
}

// headerRow is the CSV header: the column names.
func (f copyFormat) headerRow(cols []sqlpolicy.Column) []byte {
	names := make([][]byte, len(cols))
	for i, c := range cols {
		names[i] = []byte(c.Name)
	}
	return f.appendRow(nil, names)
}
