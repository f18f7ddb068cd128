package keyview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Refs are the names a statement references, lower-cased (DuckDB
// identifiers are case-insensitive).
type Refs struct {
	// Tables are the base tables it names without a catalog, with no
	// schema or schema main, that are not common table expressions in
	// scope: the references a temporary view of that name shadows.
	Tables map[string]bool
	// Columns are every component of every column reference ("t"."k"
	// gives t and k: the last is the column, unless the others name a
	// struct's field) and every USING column.
	Columns map[string]bool
	// Functions are the functions and macros it calls without a schema
	// or catalog: the calls a temporary macro of that name shadows.
	Functions map[string]bool
}

// ParseTree collects the references of the statements in text, the output
// of DuckDB's json_serialize_sql. ok is false when DuckDB could not
// serialize them (not SELECT statements, or not valid SQL): then there are
// no references to report.
func ParseTree(text string) (refs Refs, ok bool, err error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var tree struct {
		Error      bool            `json:"error"`
		Statements json.RawMessage `json:"statements"`
	}
	if err := dec.Decode(&tree); err != nil {
		return refs, false, fmt.Errorf("cannot read the parse tree: %w", err)
	}
	if tree.Error {
		return refs, false, nil
	}
	var stmts any
	dec = json.NewDecoder(bytes.NewReader(tree.Statements))
	dec.UseNumber()
	if err := dec.Decode(&stmts); err != nil {
		return refs, false, fmt.Errorf("cannot read the parse tree: %w", err)
	}
	refs = Refs{Tables: map[string]bool{}, Columns: map[string]bool{}, Functions: map[string]bool{}}
	refs.walk(stmts, nil)
	return refs, true, nil
}

// scope is the names of the common table expressions a reference can
// mean, innermost last.
type scope []string

func (s scope) has(name string) bool {
	for _, n := range s {
		if n == name {
			return true
		}
	}
	return false
}

func (s scope) with(names ...string) scope {
	return append(s[:len(s):len(s)], names...)
}

// walk collects the references under node. A query node's common table
// expressions are in scope for its body and for the expressions after
// them; a recursive one also for its own body. Where the scope is in doubt
// a name counts as a base table: a view nothing reads costs little, a
// missing one makes the query fail.
func (r *Refs) walk(node any, sc scope) {
	switch n := node.(type) {
	case []any:
		for _, c := range n {
			r.walk(c, sc)
		}
	case map[string]any:
		if n["class"] == "COLUMN_REF" {
			for _, c := range asList(n["column_names"]) {
				if s, ok := c.(string); ok {
					r.Columns[strings.ToLower(s)] = true
				}
			}
			return
		}
		if n["type"] == "BASE_TABLE" {
			r.baseTable(n, sc)
			return
		}
		if n["class"] == "FUNCTION" && n["schema"] == "" && n["catalog"] == "" {
			if name, ok := n["function_name"].(string); ok {
				r.Functions[strings.ToLower(name)] = true
			}
		}
		if n["type"] == "RECURSIVE_CTE_NODE" {
			if name, ok := n["cte_name"].(string); ok {
				sc = sc.with(strings.ToLower(name))
			}
		}
		for _, c := range asList(n["using_columns"]) {
			if s, ok := c.(string); ok {
				r.Columns[strings.ToLower(s)] = true
			}
		}
		body := sc
		if cm, ok := n["cte_map"].(map[string]any); ok {
			for _, e := range asList(cm["map"]) {
				m, _ := e.(map[string]any)
				name, _ := m["key"].(string)
				r.walk(m["value"], body)
				body = body.with(strings.ToLower(name))
			}
		}
		for k, v := range n {
			if k != "cte_map" && k != "using_columns" {
				r.walk(v, body)
			}
		}
	}
}

func (r *Refs) baseTable(n map[string]any, sc scope) {
	cat, _ := n["catalog_name"].(string)
	schema, _ := n["schema_name"].(string)
	name, _ := n["table_name"].(string)
	name = strings.ToLower(name)
	switch {
	case cat != "" || name == "":
	case schema == "" && !sc.has(name), strings.EqualFold(schema, "main"):
		r.Tables[name] = true
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
