// Command duckdb15 is a plain DuckDB 1.5 reader, for tests: it opens a
// database file read-only with DuckDB 1.5 (the LTS release most users'
// CLIs and notebooks run) and prints a query's rows, tab-separated. It is
// a module of its own so that shredduck can link another DuckDB.
//
//	duckdb15 FILE SQL
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: duckdb15 FILE SQL")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path, query string) error {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		out := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				out[i] = "NULL"
			} else {
				out[i] = fmt.Sprint(v)
			}
		}
		fmt.Println(strings.Join(out, "\t"))
	}
	return rows.Err()
}
