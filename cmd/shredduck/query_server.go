package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// runQueryServer is `shredduck query --server URL`: the token comes from
// --token-file, $SHREDDUCK_TOKEN or $SHREDDUCK_TOKEN_FILE, as for serve.
func runQueryServer(ctx context.Context, url, tokenFile, sql string, asCSV bool, stdout, stderr io.Writer) int {
	token, err := serveToken(tokenFile, tokenFile != "", os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck query: %v\n", err)
		return exitUsage
	}
	truncated, err := queryServerResult(ctx, url, token, sql, asCSV, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck query: %v\n", err)
		return exitError
	}
	if truncated && asCSV {
		fmt.Fprintln(stderr, "shredduck query: the result was cut at the server's row or byte limit")
	}
	return exitOK
}

// queryServer runs sql on a shredduck server (POST URL/v1/query) and prints
// the result as printRows does: an aligned table or CSV.
func queryServer(ctx context.Context, url, token, sql string, asCSV bool, stdout io.Writer) error {
	_, err := queryServerResult(ctx, url, token, sql, asCSV, stdout)
	return err
}

// serverResult is the server's JSON answer, cells kept as raw JSON.
type serverResult struct {
	Columns   []string            `json:"columns"`
	Types     []string            `json:"types"`
	Rows      [][]json.RawMessage `json:"rows"`
	Truncated bool                `json:"truncated"`
}

func queryServerResult(ctx context.Context, url, token, sql string, asCSV bool, stdout io.Writer) (truncated bool, err error) {
	endpoint := queryEndpoint(url)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(sql))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/sql")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: %s", endpoint, serverError(resp))
	}
	var res serverResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return false, fmt.Errorf("%s: bad answer: %w", endpoint, err)
	}
	return res.Truncated, printServerRows(stdout, &res, asCSV)
}

// queryEndpoint makes URL/v1/query of a server address; a bare host:port
// means http.
func queryEndpoint(url string) string {
	url = strings.TrimRight(url, "/")
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasSuffix(url, "/v1/query") {
		url += "/v1/query"
	}
	return url
}

// serverError reads an error answer: {"error": ...} from the query
// endpoint, a google.rpc.Status {"message": ...} from the server's auth.
func serverError(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil {
		if e.Error != "" {
			msg = e.Error
		} else if e.Message != "" {
			msg = e.Message
		}
	}
	if msg == "" {
		return resp.Status
	}
	return resp.Status + ": " + msg
}

// printServerRows lays a server result out as printRows does, with its
// cell format (format): times as UTC "2006-01-02 15:04:05", BLOBs as \x
// hex, NULL as NULL (table) or empty (CSV). Nested values print as JSON.
func printServerRows(w io.Writer, res *serverResult, asCSV bool) error {
	rec := make([]string, len(res.Columns))
	var cw *csv.Writer
	var tw *tabwriter.Writer
	if asCSV {
		cw = csv.NewWriter(w)
		cw.Write(res.Columns)
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(res.Columns, "\t"))
	}
	for _, row := range res.Rows {
		if len(row) != len(rec) {
			return fmt.Errorf("bad answer: a row of %d cells for %d columns", len(row), len(rec))
		}
		for i, cell := range row {
			typ := ""
			if i < len(res.Types) {
				typ = res.Types[i]
			}
			rec[i] = format(cellValue(cell, typ), asCSV)
		}
		if asCSV {
			cw.Write(rec)
		} else {
			fmt.Fprintln(tw, strings.Join(rec, "\t"))
		}
	}
	if asCSV {
		cw.Flush()
		return cw.Error()
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Truncated {
		_, err := fmt.Fprintf(w, "(%d rows; cut at the server's row or byte limit)\n", len(res.Rows))
		return err
	}
	_, err := fmt.Fprintf(w, "(%d rows)\n", len(res.Rows))
	return err
}

// cellValue turns a JSON cell back into what the driver would have given
// format locally, as far as the printed text differs: nil, time.Time,
// []byte, string. Numbers, booleans and nested values stay JSON text.
func cellValue(cell json.RawMessage, typ string) any {
	cell = bytes.TrimSpace(cell)
	if len(cell) == 0 || string(cell) == "null" {
		return nil
	}
	if cell[0] != '"' {
		return string(cell)
	}
	var s string
	if err := json.Unmarshal(cell, &s); err != nil {
		return string(cell)
	}
	switch {
	case strings.HasPrefix(typ, "TIMESTAMP"):
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t
		}
	case typ == "DATE":
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			return t
		}
	case typ == "BLOB":
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return s
}
