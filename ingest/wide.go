package ingest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/shredduck/shredduck/shred"
)

// Wide tables (NDJSON such as GH Archive: hundreds of mostly NULL columns)
// load differently from narrow OTLP tables. DuckDB's INSERT costs per row
// and per table column, NULL or not, and each inserting thread builds its
// own row group, holding a 256 KiB block per column and per validity mask
// until the row group is written. On 240k GH Archive events (725 columns,
// ~890 MB) one DuckDB thread used two thirds of the CPU time of two and
// half the memory. So while a load writes a table of more than wideColumns
// columns, DuckDB runs on one thread (the decode workers use the other
// cores) and its memory_limit is at least memoryBase + bytesPerColumn per
// column. On 247k generated GH Archive events (726 columns) a new table's
// load failed at once below about 0.6 MB per column (512 KiB failed, 576
// KiB worked); 704 KiB leaves a fifth more, and a peak RSS of ~0.9 GB (1
// MiB per column gave 1.1 GB). Appending to a table that exists needs
// more: DuckDB adds the new rows to the table's last, partial row group,
// which it first unpacks into a block per column and validity mask, beside
// the load's own; a warm load of 20k events failed with 960 KiB per column
// and worked with 1 MiB, so such loads get bytesPerColumnWarm (1.125 MiB).
// The thread count is restored when the load ends; the raised memory limit
// stays, because the checkpoint that follows
// (at COMMIT or when the database closes) needs it as much as the insert:
// restoring 256 MB made the final CHECKPOINT of a 725-column table fail.
//
// A load into a wide table also turns off DuckDB's checkpoint vacuum
// (max_vacuum_tasks = 0) for the rest of the session. The vacuum merges
// the partial last row group of the earlier load with the new ones, which
// rewrites every new row group and needs memory for all their columns at
// once: loading the 247k events again into the same table took 36 s
// instead of 16 s, and closing a 726-column table after a second load of
// 800 real GH Archive events failed under the limit above (TestWide-
// ReingestCheckpoints). The price: each load leaves its last, partial row
// group behind (docs/SCHEMA.md).
const (
	wideColumns = 256
	// narrowColumns or fewer fit DuckDB's memory limit as it is.
	narrowColumns      = 64
	bytesPerColumn     = 704 << 10
	bytesPerColumnWarm = 1152 << 10
	memoryBase         = 64 << 20
)

// tuning is the DuckDB settings a load changed for wide tables.
type tuning struct {
	enabled   bool  // Load tunes threads and memory
	memOnly   bool  // a Committer's transactions raise the memory limit only
	threads   int64 // before the load; 0 when not read yet
	memory    string
	memoryNow int64 // bytes, once read
	raised    bool
}

// fitTable adapts DuckDB's settings to t before rows are inserted into it.
func (tx *Tx) fitTable(t *table) error {
	tu := &tx.tune
	if !tu.enabled && !tu.memOnly {
		return nil
	}
	width := tableWidth(t)
	if width <= narrowColumns {
		return nil
	}
	// A narrower table keeps DuckDB's threads, each with its own blocks.
	perThread := int64(1)
	if width <= wideColumns && tu.enabled {
		if err := tx.conn.QueryRowContext(tx.ctx, "SELECT current_setting('threads')").Scan(&perThread); err != nil {
			return err
		}
	}
	if tu.enabled && width > wideColumns && tu.threads == 0 {
		if err := tx.conn.QueryRowContext(tx.ctx, "SELECT current_setting('threads')").Scan(&tu.threads); err != nil {
			return err
		}
		if tu.threads > 1 {
			if _, err := tx.conn.ExecContext(tx.ctx, "SET threads = 1"); err != nil {
				return err
			}
		}
	}
	if tu.memory == "" {
		if err := tx.conn.QueryRowContext(tx.ctx, "SELECT current_setting('memory_limit')").Scan(&tu.memory); err != nil {
			return err
		}
		tu.memoryNow = parseSize(tu.memory)
	}
	need := memoryBase + (memoryNeed(width, !t.stats.Created)-memoryBase)*perThread
	// DuckDB prints the limit rounded ("880.7 MiB"): 1% of slack.
	if tu.memoryNow > 0 && need > tu.memoryNow+tu.memoryNow/100 {
		if _, err := tx.conn.ExecContext(tx.ctx, fmt.Sprintf("SET memory_limit = '%dB'", need)); err != nil {
			if tu.memOnly {
				// shredduck serve locks DuckDB's configuration for its
				// query endpoint; it sizes the limit for the tables it
				// finds at startup (FitMemoryLimit), not for new ones.
				mb := (memoryNeed(width, true) + 999_999) / 1_000_000
				// The data that made the table this wide is refused
				// for good: sent again, it fails again.
				return rejected(fmt.Errorf("table %s would have %d columns, which need DuckDB's memory_limit at %d MB or more (it is %s); restart the server with --memory-limit %dMB: %w",
					t.name, width, mb, tu.memory, mb, err))
			}
			return err
		}
		tu.memoryNow, tu.raised = need, true
	}
	return nil
}

// tableWidth counts t's stored columns as DuckDB's insert holds them:
// a block per vector, and a list (a map) has one for its entries besides
// those of its elements.
func tableWidth(t *table) int {
	n := 0
	for _, c := range t.cols {
		_, virtual := t.virtual[c]
		_, absent := t.absent[c]
		if !virtual && !absent {
			n += vectors(t.types[c])
		}
	}
	return n
}

func vectors(typ *shred.Type) int {
	switch typ.Kind {
	case shred.List:
		return 1 + vectors(typ.Elem)
	case shred.Struct:
		n := 0
		for _, f := range typ.Fields {
			n += vectors(f.Type)
		}
		return n
	}
	return 1
}

// capColumns lowers the table's budget of stored columns to what the
// memory limit can take when the limit cannot be raised (a server locks
// DuckDB's configuration): keys past it go to the overflow instead of the
// data being refused.
func (tx *Tx) capColumns(t *table) error {
	tu := &tx.tune
	if !tu.memOnly {
		return nil
	}
	if tu.memory == "" {
		if err := tx.conn.QueryRowContext(tx.ctx, "SELECT current_setting('memory_limit')").Scan(&tu.memory); err != nil {
			return err
		}
		tu.memoryNow = parseSize(tu.memory)
	}
	if tu.memoryNow <= 0 {
		return nil
	}
	core := 0
	for _, c := range t.core { // the on-demand maps too: room for them
		core += vectors(c.Type)
	}
	room := max(int((tu.memoryNow-memoryBase)/bytesPerColumnWarm)-core, 0)
	if room < t.schema.MaxColumns {
		t.schema.MaxColumns = room
	}
	return nil
}

// fitBeforeDDL is fitTable run before a batch's CREATE TABLE or ALTERs,
// not only at its insert: each ALTER TABLE ... ADD COLUMN keeps a copy of
// the table's columns until the transaction ends, outside DuckDB's
// memory_limit (2,000 of them on a 30-column table took 1.5 GB of RSS,
// which stayed after the rollback), so a width the limit cannot take is
// refused before the first of them.
func (tx *Tx) fitBeforeDDL(t *table) error {
	if err := tx.fitTable(t); err != nil {
		return fmt.Errorf("cannot configure DuckDB for table %s: %w", t.name, err)
	}
	return nil
}

// memoryNeed is the memory_limit a load into a table of cols columns needs
// (see above); warm: the table exists.
func memoryNeed(cols int, warm bool) int64 {
	per := bytesPerColumn
	if warm {
		per = bytesPerColumnWarm
	}
	return int64(memoryBase + cols*per)
}

// FitMemoryLimit raises DuckDB's memory_limit, if it is lower, to what
// appending to the widest table in the database needs (see above). A
// server calls it at startup, before it locks DuckDB's configuration.
func (d *DB) FitMemoryLimit(ctx context.Context) error {
	var widest int
	var current string
	err := d.SQL.QueryRowContext(ctx, `SELECT coalesce(max(n), 0), current_setting('memory_limit') FROM (
		SELECT count(*) AS n FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main' GROUP BY table_name)`).Scan(&widest, &current)
	if err != nil {
		return err
	}
	if widest <= wideColumns {
		return nil
	}
	need := memoryNeed(widest, true)
	if now := parseSize(current); now > 0 && need > now {
		_, err = d.SQL.ExecContext(ctx, fmt.Sprintf("SET memory_limit = '%dB'", need))
	}
	return err
}

// beforeCommit turns off the checkpoint vacuum when the load wrote rows
// into a wide table (see above).
func (tx *Tx) beforeCommit() error {
	if !tx.tune.enabled {
		return nil
	}
	for _, t := range tx.tables {
		if len(t.cols) > wideColumns && t.stats.Rows > 0 {
			_, err := tx.conn.ExecContext(tx.ctx, "SET max_vacuum_tasks = 0")
			return err
		}
	}
	return nil
}

// untune restores the thread count fitTable changed (not the memory
// limit: see above).
func (tx *Tx) untune() {
	tu := &tx.tune
	if tu.threads > 1 {
		tx.conn.ExecContext(context.Background(), "SET threads = "+strconv.FormatInt(tu.threads, 10))
	}
	tx.tune = tuning{enabled: tu.enabled, memOnly: tu.memOnly}
}

// parseSize parses a size as DuckDB prints memory_limit ("244.1 MiB",
// "18.8 GiB", "512 bytes"); 0 when it cannot.
func parseSize(s string) int64 {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0
	}
	mult := map[string]float64{
		"bytes": 1, "B": 1,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	}[unit]
	return int64(v * mult)
}
