package ingest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// TimeExpr is the SQL expression of a record's own time in a table of an
// OTLP transform, as retention and export judge it: a span's start, a
// log record's time (its observed time when it has none, as the OTLP data
// model says), a data point's time. "" for other transforms.
func TimeExpr(transform string) string {
	switch transform {
	case transforms.OTLPTraces:
		return "start_time"
	case transforms.OTLPLogs:
		return `coalesce("time", observed_time)`
	case transforms.OTLPMetrics:
		return `"time"`
	}
	return ""
}

// timeRange returns a query of the rows of table, of transform, whose time
// (TimeExpr) is in [from, to), Unix nanoseconds, 0 meaning unbounded. It
// compares the stored columns themselves so that DuckDB skips the row
// groups outside by their min/max: through coalesce() it reads them all
// (a log hour out of 4M rows: 26 ms instead of 1 ms).
func timeRange(table, transform string, from, to int64) string {
	tq := shred.QuoteIdent(table)
	in := func(col string) string {
		c := []string{"true"}
		if from != 0 {
			c = append(c, fmt.Sprintf("%s >= make_timestamp_ns(%d)", col, from))
		}
		if to != 0 {
			c = append(c, fmt.Sprintf("%s < make_timestamp_ns(%d)", col, to))
		}
		return strings.Join(c, " AND ")
	}
	if transform == transforms.OTLPLogs {
		return fmt.Sprintf(`SELECT * FROM %s WHERE %s UNION ALL SELECT * FROM %s WHERE "time" IS NULL AND %s`, tq, in(`"time"`), tq, in("observed_time"))
	}
	return fmt.Sprintf("SELECT * FROM %s WHERE %s", tq, in(TimeExpr(transform)))
}

// ExportOptions configure Export.
type ExportOptions struct {
	Dir    string
	Tables []string // default: every table of an OTLP transform
	// Since and Until bound the hours exported (rounded out to whole
	// hours, so that a file always holds its whole hour); zero: unbounded.
	// Without either, rows with no time go to the NULL partition.
	Since, Until time.Time
}

// ExportedFile is one Parquet file Export wrote.
type ExportedFile struct {
	Table    string
	Hour     time.Time // zero for the rows with no time
	Path     string
	Rows     int64
	Replaced bool // a file of the same hour was there and is replaced
	// Kept: the hour's file was there with more rows than the table
	// holds now (retention deleted some since), and is left as it was;
	// Rows are its rows.
	Kept bool
}

// sidecarName is the file beside a table's partitions that lets
// ImportParquet make the same table: its transform, column types (Parquet
// has no ENUM: those read back as VARCHAR) and attribute catalog. Readers
// of Hive layouts skip files whose names start with an underscore.
const sidecarName = "_shredduck_table.json"

// nullPartition is Hive's name for a partition value that is NULL.
const nullPartition = "__HIVE_DEFAULT_PARTITION__"

type sidecar struct {
	Table     string          `json:"table"`
	Transform string          `json:"transform"`
	Columns   []sidecarColumn `json:"columns"`
	Catalog   []sidecarKey    `json:"catalog"`
}

type sidecarColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type sidecarKey struct {
	Column   string `json:"column"`
	Level    string `json:"level"`
	Key      string `json:"key"`
	Type     string `json:"type"`
	Overflow bool   `json:"overflow"`
	Promoted bool   `json:"promoted,omitempty"`
}

// Export writes tables to Parquet files in a Hive layout,
// DIR/TABLE/date=YYYY-MM-DD/hour=HH/data.parquet (UTC, by TimeExpr),
// zstd-compressed, with the tables' own column types. A file is written
// beside its final name and renamed over it, so a second run replaces an
// hour's file rather than adding one, and a crash leaves no half file.
// All tables are read in one snapshot. onFile, when set, is called after
// each file.
func (d *DB) Export(ctx context.Context, opt ExportOptions, onFile func(ExportedFile)) ([]ExportedFile, error) {
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	tables, err := exportTables(ctx, conn, opt.Tables)
	if err != nil {
		return nil, err
	}
	since, until := opt.Since, opt.Until
	if !since.IsZero() {
		since = since.UTC().Truncate(time.Hour)
	}
	if !until.IsZero() {
		if u := until.UTC().Truncate(time.Hour); u.Before(until) {
			until = u.Add(time.Hour)
		} else {
			until = u
		}
	}
	var out []ExportedFile
	for _, t := range tables {
		files, err := d.exportTable(ctx, conn, t, opt.Dir, since, until, onFile)
		out = append(out, files...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func exportTables(ctx context.Context, q Queryer, want []string) ([][2]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT table_name, transform FROM shredduck_tables ORDER BY table_name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all [][2]string
	for rows.Next() {
		var t [2]string
		if err := rows.Scan(&t[0], &t[1]); err != nil {
			return nil, err
		}
		all = append(all, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(want) == 0 {
		var out [][2]string
		for _, t := range all {
			if TimeExpr(t[1]) != "" {
				out = append(out, t)
			}
		}
		return out, nil
	}
	var out [][2]string
	for _, name := range want {
		found := false
		for _, t := range all {
			if strings.EqualFold(t[0], name) {
				if TimeExpr(t[1]) == "" {
					return nil, fmt.Errorf("table %s holds %s data, which has no record time to partition by; export takes the OTLP tables", t[0], t[1])
				}
				out, found = append(out, t), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no table %s in the database", name)
		}
	}
	return out, nil
}

// HourFile is the file Export writes for table's hour starting at h
// (zero: the rows with no time).
func HourFile(dir, table string, h time.Time) string {
	return filepath.Join(hourPath(dir, table, h), "data.parquet")
}

// hourPath is the Hive partition directory of an hour (zero: NULL).
func hourPath(dir, table string, h time.Time) string {
	if h.IsZero() {
		return filepath.Join(dir, table, "date="+nullPartition, "hour="+nullPartition)
	}
	return filepath.Join(dir, table, "date="+h.Format("2006-01-02"), "hour="+h.Format("15"))
}

func (d *DB) exportTable(ctx context.Context, conn *sql.Conn, t [2]string, dir string, since, until time.Time, onFile func(ExportedFile)) ([]ExportedFile, error) {
	name, te := t[0], TimeExpr(t[1])
	tq := shred.QuoteIdent(name)
	if err := writeSidecar(ctx, conn, dir, name, t[1]); err != nil {
		return nil, err
	}
	var from, to int64
	if !since.IsZero() {
		from = since.UnixNano()
	}
	if !until.IsZero() {
		to = until.UnixNano()
	}
	all := "SELECT * FROM " + tq
	if from != 0 || to != 0 {
		all = timeRange(name, t[1], from, to)
	}
	// epoch_ns of the hour: an integer scans exactly whatever the driver
	// does with nanoseconds of a TIMESTAMP_NS.
	rows, err := conn.QueryContext(ctx, fmt.Sprintf("SELECT DISTINCT epoch_ns(date_trunc('hour', %s)) FROM (%s) ORDER BY 1 NULLS LAST", te, all))
	if err != nil {
		return nil, fmt.Errorf("cannot list the hours of %s: %w", name, err)
	}
	var hours []*int64
	for rows.Next() {
		var h *int64
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return nil, err
		}
		hours = append(hours, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []ExportedFile
	for _, h := range hours {
		f := ExportedFile{Table: name}
		sel := fmt.Sprintf("SELECT * FROM %s WHERE %s IS NULL", tq, te)
		if h != nil {
			f.Hour = time.Unix(0, *h).UTC()
			sel = timeRange(name, t[1], *h, *h+int64(time.Hour))
		} else if !since.IsZero() || !until.IsZero() {
			continue
		}
		pdir := hourPath(dir, name, f.Hour)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return out, fmt.Errorf("cannot create %s: %w", pdir, err)
		}
		f.Path = HourFile(dir, name, f.Hour)
		tmp := filepath.Join(pdir, ".data.parquet.tmp")
		res, err := conn.ExecContext(ctx, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet, COMPRESSION zstd)", sel, shred.QuoteString(tmp)))
		if err != nil {
			os.Remove(tmp)
			return out, fmt.Errorf("cannot write %s: %w", f.Path, classify(err))
		}
		f.Rows, _ = res.RowsAffected()
		if _, err := os.Stat(f.Path); err == nil {
			// A file with more rows than the table has now holds rows
			// retention deleted since: replacing it would lose them.
			var had int64
			if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+shred.QuoteString(f.Path)+")").Scan(&had); err != nil {
				os.Remove(tmp)
				return out, fmt.Errorf("cannot read %s: %w", f.Path, err)
			}
			if had > f.Rows {
				os.Remove(tmp)
				f.Kept, f.Rows = true, had
				out = append(out, f)
				if onFile != nil {
					onFile(f)
				}
				continue
			}
			f.Replaced = true
		}
		if err := syncRename(tmp, f.Path); err != nil {
			os.Remove(tmp)
			return out, err
		}
		out = append(out, f)
		if onFile != nil {
			onFile(f)
		}
	}
	return out, nil
}

// syncRename fsyncs the file at tmp and renames it to path.
func syncRename(tmp, path string) error {
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

func writeSidecar(ctx context.Context, conn *sql.Conn, dir, table, transform string) error {
	sc := sidecar{Table: table, Transform: transform}
	rows, err := conn.QueryContext(ctx, `SELECT column_name, data_type FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = current_schema() AND table_name = ? ORDER BY column_index`, table)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c sidecarColumn
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			rows.Close()
			return err
		}
		sc.Columns = append(sc.Columns, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = conn.QueryContext(ctx, `SELECT column_name, level, key, type, overflow, promoted IS NOT NULL FROM shredduck_columns
		WHERE table_name = ? ORDER BY first_seen, rowid`, table)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k sidecarKey
		if err := rows.Scan(&k.Column, &k.Level, &k.Key, &k.Type, &k.Overflow, &k.Promoted); err != nil {
			rows.Close()
			return err
		}
		sc.Catalog = append(sc.Catalog, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return err
	}
	tdir := filepath.Join(dir, table)
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", tdir, err)
	}
	path := filepath.Join(tdir, sidecarName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return syncRename(tmp, path)
}

// IsParquetPath reports whether a path given to ingest is Parquet: a
// .parquet file, or a directory with .parquet files under it (an
// export's, or one table's in it).
func IsParquetPath(path string) bool {
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		return true
	}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	found := false
	filepath.WalkDir(path, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(strings.ToLower(e.Name()), ".parquet") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// ImportResult is what ImportParquet loaded.
type ImportResult struct {
	Tables []ImportedTable
}

// ImportedTable is one table's part of an import.
type ImportedTable struct {
	Table   string
	Files   int
	Rows    int64
	Created bool
}

// ImportParquet loads Parquet files, as Export writes them, back into
// their tables in one transaction: the table is the directory above the
// files' date= partition (or table, when given), made from the export's
// _shredduck_table.json (same transform, column types and attribute
// catalog) when the database has no such table. Into an existing table
// the files' columns go by name: attribute columns the table lacks are
// added from the export's catalog, virtual core columns the files hold
// other values of are stored first. Loading the same files twice stores
// their rows twice.
func (d *DB) ImportParquet(ctx context.Context, paths []string, table string, maxColumns int) (*ImportResult, error) {
	groups, err := parquetGroups(paths, table)
	if err != nil {
		return nil, err
	}
	tx, err := d.Begin(ctx, maxColumns)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res := &ImportResult{}
	for _, g := range groups {
		it, err := tx.importGroup(g)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", g.table, err)
		}
		res.Tables = append(res.Tables, it)
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

type parquetGroup struct {
	table   string
	dir     string // where the sidecar is looked for; "" if none
	files   []string
	sidecar *sidecar
}

// parquetGroups finds the Parquet files under paths and groups them by
// table.
func parquetGroups(paths []string, table string) ([]*parquetGroup, error) {
	byTable := map[string]*parquetGroup{}
	var order []string
	add := func(file string) error {
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		name, dir := table, ""
		parts := strings.Split(filepath.ToSlash(abs), "/")
		for i, p := range parts {
			if strings.HasPrefix(p, "date=") && i > 0 {
				dir = strings.Join(parts[:i], "/")
				if name == "" {
					name = parts[i-1]
				}
				break
			}
		}
		if name == "" {
			return fmt.Errorf("cannot tell the table of %s (it is not under a TABLE/date=.../ directory): give --table", file)
		}
		g := byTable[strings.ToLower(name)]
		if g == nil {
			g = &parquetGroup{table: name, dir: dir}
			byTable[strings.ToLower(name)] = g
			order = append(order, strings.ToLower(name))
		}
		g.files = append(g.files, abs)
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", p, err)
		}
		if !st.IsDir() {
			if err := add(p); err != nil {
				return nil, err
			}
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case e.IsDir(), strings.HasPrefix(e.Name(), "."), e.Name() == sidecarName:
			case strings.HasSuffix(strings.ToLower(e.Name()), ".parquet"):
				found = append(found, path)
			default:
				return fmt.Errorf("%s is not a Parquet file: load Parquet and other inputs separately", path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", p, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("no .parquet files under %s", p)
		}
		sort.Strings(found)
		for _, f := range found {
			if err := add(f); err != nil {
				return nil, err
			}
		}
	}
	var out []*parquetGroup
	for _, k := range order {
		g := byTable[k]
		if g.dir != "" {
			b, err := os.ReadFile(filepath.Join(g.dir, sidecarName))
			switch {
			case err == nil:
				g.sidecar = new(sidecar)
				if err := json.Unmarshal(b, g.sidecar); err != nil {
					return nil, fmt.Errorf("%s: %w", filepath.Join(g.dir, sidecarName), err)
				}
			case !errors.Is(err, os.ErrNotExist):
				return nil, err
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// fileColumns returns the columns of the files (without the Hive
// partition columns) and their types.
func (tx *Tx) fileColumns(scan string) ([]sidecarColumn, error) {
	rows, err := tx.conn.QueryContext(tx.ctx, "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "+scan+")")
	if err != nil {
		return nil, fmt.Errorf("cannot read the files: %w", rejected(err))
	}
	defer rows.Close()
	var out []sidecarColumn
	for rows.Next() {
		var c sidecarColumn
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (tx *Tx) importGroup(g *parquetGroup) (ImportedTable, error) {
	it := ImportedTable{Table: g.table, Files: len(g.files)}
	quoted := make([]string, len(g.files))
	for i, f := range g.files {
		quoted[i] = shred.QuoteString(f)
	}
	// Hive partitioning only for files in date= directories: elsewhere
	// it would find no partitions, or take a stray key=value directory.
	hive := g.dir != ""
	scan := fmt.Sprintf("read_parquet([%s], hive_partitioning = %t, union_by_name = true)", strings.Join(quoted, ", "), hive)
	cols, err := tx.fileColumns(scan)
	if err != nil {
		return it, err
	}
	var transform string
	err = tx.conn.QueryRowContext(tx.ctx, "SELECT transform FROM shredduck_tables WHERE lower(table_name) = lower(?)", g.table).Scan(&transform)
	exists := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if g.sidecar == nil {
			return it, fmt.Errorf("the database has no such table and there is no %s beside the files to make it from (shredduck export writes one)", sidecarName)
		}
		transform = g.sidecar.Transform
	case err != nil:
		return it, err
	}
	if g.sidecar != nil && g.sidecar.Transform != transform {
		return it, fmt.Errorf("the files hold %s data; the table holds %s", g.sidecar.Transform, transform)
	}
	fileCols := map[string]sidecarColumn{}
	for _, c := range cols {
		fileCols[strings.ToLower(c.Name)] = c
	}
	if hive {
		// The partition columns, unless the export had columns so named.
		for _, p := range []string{"date", "hour"} {
			if g.sidecar == nil || !g.sidecar.has(p) {
				delete(fileCols, p)
			}
		}
	}
	if !exists {
		if err := tx.createFromSidecar(g.sidecar); err != nil {
			return it, err
		}
		it.Created = true
	} else if err := tx.fitImport(g, transform, scan, fileCols); err != nil {
		return it, err
	}
	var names []string
	for _, c := range cols {
		if _, ok := fileCols[strings.ToLower(c.Name)]; ok {
			names = append(names, shred.QuoteIdent(c.Name))
		}
	}
	list := strings.Join(names, ", ")
	res, err := tx.conn.ExecContext(tx.ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", shred.QuoteIdent(g.table), list, list, scan))
	if err != nil {
		return it, fmt.Errorf("cannot insert the files' rows: %w", rejected(err))
	}
	it.Rows, _ = res.RowsAffected()
	return it, nil
}

func (sc *sidecar) has(col string) bool {
	for _, c := range sc.Columns {
		if strings.EqualFold(c.Name, col) {
			return true
		}
	}
	return false
}

// createFromSidecar makes the exported table: its columns with their
// types, stored (none virtual), and its catalog.
func (tx *Tx) createFromSidecar(sc *sidecar) error {
	if _, err := transforms.Lookup(sc.Transform); err != nil {
		return err
	}
	if err := tx.startDDL(); err != nil {
		return err
	}
	defs := make([]string, len(sc.Columns))
	for i, c := range sc.Columns {
		defs[i] = shred.QuoteIdent(c.Name) + " " + c.Type
	}
	if _, err := tx.conn.ExecContext(tx.ctx, "CREATE TABLE "+shred.QuoteIdent(sc.Table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return fmt.Errorf("cannot create the table: %w", err)
	}
	if _, err := tx.conn.ExecContext(tx.ctx, "INSERT INTO shredduck_tables (table_name, transform) VALUES (?, ?)", sc.Table, sc.Transform); err != nil {
		return err
	}
	for _, k := range sc.Catalog {
		if err := tx.insertKey(sc.Table, k); err != nil {
			return err
		}
	}
	return nil
}

func (tx *Tx) insertKey(table string, k sidecarKey) error {
	_, err := tx.conn.ExecContext(tx.ctx, `INSERT INTO shredduck_columns (table_name, column_name, level, key, type, overflow, promoted)
		VALUES (?, ?, ?, ?, ?, ?, CASE WHEN ? THEN now() END)`, table, k.Column, k.Level, k.Key, k.Type, k.Overflow, k.Promoted)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

// fitImport makes an existing table take the files' columns: attribute
// columns it lacks are added (from the export's catalog), on-demand core
// columns added, and virtual core columns whose values in the files are
// not all the default stored; virtual columns the files hold only the
// default of are left out of the insert (they read the same).
func (tx *Tx) fitImport(g *parquetGroup, transform, scan string, fileCols map[string]sidecarColumn) error {
	tr, err := transforms.Lookup(transform)
	if err != nil {
		return err
	}
	t, err := tx.table(g.table, tr)
	if err != nil {
		return err
	}
	have, err := tableColumns(tx.ctx, tx.conn, t.name)
	if err != nil {
		return err
	}
	var store, onDemand []shred.CoreColumn
	for _, c := range t.core {
		fc, inFiles := fileCols[strings.ToLower(c.Name)]
		if !inFiles {
			continue
		}
		_, virtual := t.virtual[c.Name]
		_, absent := t.absent[c.Name]
		if !virtual && !absent {
			continue
		}
		var other bool
		q := fmt.Sprintf("SELECT count(*) > 0 FROM (SELECT %s AS v FROM %s) WHERE v IS DISTINCT FROM %s", shred.QuoteIdent(fc.Name), scan, c.DefaultSQL())
		if err := tx.conn.QueryRowContext(tx.ctx, q).Scan(&other); err != nil {
			return err
		}
		switch {
		case !other:
			delete(fileCols, strings.ToLower(c.Name))
		case virtual:
			store = append(store, c)
		default:
			onDemand = append(onDemand, c)
		}
	}
	keys := map[string]sidecarKey{}
	if g.sidecar != nil {
		for _, k := range g.sidecar.Catalog {
			if !k.Overflow {
				keys[strings.ToLower(k.Column)] = k
				continue
			}
			// An overflowed key the table does not know yet: its values
			// are in the files' maps, read through the catalog.
			var n int
			if err := tx.conn.QueryRowContext(tx.ctx, "SELECT count(*) FROM shredduck_columns WHERE table_name = ? AND level = ? AND key = ?", t.name, k.Level, k.Key).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				if err := tx.insertKey(t.name, k); err != nil {
					return err
				}
			}
		}
	}
	var missing []sidecarColumn
	for lc, c := range fileCols {
		if have[lc] || t.absent[c.Name].Name != "" {
			continue
		}
		if _, ok := keys[lc]; !ok {
			return fmt.Errorf("the files have a column %s that the table lacks and the export's catalog does not name", c.Name)
		}
		missing = append(missing, c)
	}
	if len(store)+len(onDemand)+len(missing) == 0 {
		return nil
	}
	if err := tx.startDDL(); err != nil {
		return err
	}
	if err := tx.storeColumns(t, store); err != nil {
		return err
	}
	if err := tx.addOnDemand(t, onDemand); err != nil {
		return err
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Name < missing[j].Name })
	for _, c := range missing {
		if _, err := tx.conn.ExecContext(tx.ctx, "ALTER TABLE "+shred.QuoteIdent(t.name)+" ADD COLUMN "+shred.QuoteIdent(c.Name)+" "+c.Type); err != nil {
			return fmt.Errorf("cannot add column %s: %w", c.Name, err)
		}
		k := keys[strings.ToLower(c.Name)]
		var n int
		if err := tx.conn.QueryRowContext(tx.ctx, "SELECT count(*) FROM shredduck_columns WHERE table_name = ? AND level = ? AND key = ?", t.name, k.Level, k.Key).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("the export stores key %q (%s) in column %s, which this table keeps elsewhere", k.Key, k.Level, c.Name)
		}
		if err := tx.insertKey(t.name, k); err != nil {
			return err
		}
	}
	// The table's cached state no longer matches it.
	delete(tx.tables, t.name)
	return nil
}
