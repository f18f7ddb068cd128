// Command retention measures when DuckDB gives the space of deleted rows
// back: it inserts hours of span-shaped rows into a file, deletes those
// older than a retention after each hour, checkpoints, and prints the
// file's size and free blocks (docs/RETENTION.md).
//
//	go run ./bench/retention -hours 40 -keep 4 [-vacuum 2] [-jitter 6] [-open]
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	vacuum := flag.Int("vacuum", 0, "max_vacuum_tasks")
	hours := flag.Int("hours", 24, "simulated hours")
	keep := flag.Int("keep", 4, "retention in hours")
	per := flag.Int("per", 250000, "rows per hour")
	commit := flag.Int("commit", 8192, "rows per commit")
	ckpt := flag.String("ckpt", "hour", "hour|none: checkpoint after each hour's delete")
	deleteBatch := flag.Int("delbatch", 0, "delete in steps of this many rows (0: one statement)")
	jitter := flag.Int("jitter", 0, "record times spread this many hours back (late data)")
	open := flag.Bool("open", false, "hold a transaction with an uncommitted append on another connection during each CHECKPOINT")
	path := flag.String("db", os.TempDir()+"/shredduck-retention.duckdb", "database file (replaced)")
	flag.Parse()
	os.Remove(*path)
	os.Remove(*path + ".wal")
	db, err := sql.Open("duckdb", *path+"?storage_compatibility_version=v1.5.0")
	must(err)
	db.SetMaxOpenConns(2)
	must1(db.Exec("SET preserve_insertion_order=false"))
	must1(db.Exec(fmt.Sprintf("SET max_vacuum_tasks=%d", *vacuum)))
	must1(db.Exec("SET checkpoint_threshold='1GB'"))
	must1(db.Exec(`CREATE TABLE t(ts TIMESTAMP_NS, trace_id VARCHAR, name VARCHAR, svc VARCHAR, dur BIGINT, code BIGINT, route VARCHAR, val DOUBLE)`))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	hour := int64(time.Hour)
	for h := 0; h < *hours; h++ {
		t0 := time.Now()
		for i := 0; i < *per; i += *commit {
			n := min(*commit, *per-i)
			start := base + int64(h)*hour + int64(i)*hour/int64(*per)
			step := hour / int64(*per)
			must1(db.Exec(fmt.Sprintf(`INSERT INTO t SELECT make_timestamp_ns(%d + r*%d - (hash(r || '%d') %% %d)::BIGINT), md5(r::VARCHAR || '%d'), 'span-' || (r%%50), 'svc-' || (r%%7), (r*7919)%%100000, 200 + (r%%5)*100, '/api/' || (r%%40), r*1.5 FROM range(%d) x(r)`, start, step, h, max(1, int64(*jitter)*hour), h, n)))
		}
		ins := time.Since(t0)
		t1 := time.Now()
		cut := base + int64(h+1-*keep)*hour
		var deleted int64
		if *deleteBatch > 0 {
			for {
				res, err := db.Exec(fmt.Sprintf(`DELETE FROM t WHERE rowid IN (SELECT rowid FROM t WHERE ts < make_timestamp_ns(%d) LIMIT %d)`, cut, *deleteBatch))
				must(err)
				n, _ := res.RowsAffected()
				deleted += n
				if n == 0 {
					break
				}
			}
		} else {
			res, err := db.Exec(fmt.Sprintf(`DELETE FROM t WHERE ts < make_timestamp_ns(%d)`, cut))
			must(err)
			deleted, _ = res.RowsAffected()
		}
		del := time.Since(t1)
		t2 := time.Now()
		if *ckpt == "hour" {
			if *open {
				ctx := context.Background()
				c, err := db.Conn(ctx)
				must(err)
				must1(c.ExecContext(ctx, "BEGIN TRANSACTION"))
				must1(c.ExecContext(ctx, "INSERT INTO t (ts) VALUES (now()::TIMESTAMP)"))
				_, err = db.Exec("CHECKPOINT")
				if err != nil {
					fmt.Println("checkpoint:", err)
				}
				must1(c.ExecContext(ctx, "ROLLBACK"))
				c.Close()
			} else {
				must1(db.Exec("CHECKPOINT"))
			}
		}
		cp := time.Since(t2)
		var rows int64
		must(db.QueryRow("SELECT count(*) FROM t").Scan(&rows))
		var blocks, free int64
		must(db.QueryRow("SELECT total_blocks, free_blocks FROM pragma_database_size()").Scan(&blocks, &free))
		st, _ := os.Stat(*path)
		fmt.Printf("hour %2d rows %8d deleted %7d file %6.1f MB blocks %5d free %5d insert %v delete %v ckpt %v\n", h, rows, deleted, float64(st.Size())/1e6, blocks, free, ins.Round(time.Millisecond), del.Round(time.Millisecond), cp.Round(time.Millisecond))
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
func must1(_ sql.Result, err error) { must(err) }
