package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// DefaultMaxColumns is the default limit of dynamic columns per table.
const DefaultMaxColumns = 2000

// TableStats is what one load did to one table.
type TableStats struct {
	Table          string `json:"table"`
	Transform      string `json:"transform"`
	Rows           int64  `json:"rows"`
	Created        bool   `json:"created"`
	ColumnsAdded   int    `json:"columns_added"`
	ColumnsWidened int    `json:"columns_widened"`
	// ColumnsStored counts the deferred core columns that got storage
	// (shred.CoreColumn.Deferred).
	ColumnsStored  int `json:"columns_stored"`
	KeysOverflowed int `json:"keys_overflowed"`
	// KeysPromoted counts overflowed keys that got a stored column.
	KeysPromoted int `json:"keys_promoted"`
	// DepthTruncated counts the values stored whole, as JSON, because
	// they were nested deeper than --max-depth (NDJSON).
	DepthTruncated int `json:"depth_truncated"`
	// Strays counts the values stored in the overflow under a key that
	// has a stored column, because the column would take them only by a
	// lossy widening (docs/SCHEMA.md, 5.6).
	Strays int64 `json:"strays"`
	Bytes  int64 `json:"bytes"`
}

// SchemaChanged says whether the load created the table or changed its
// columns or its keys in the catalog: a transaction written beside it
// would not see them until it commits.
func (s *TableStats) SchemaChanged() bool {
	return s.Created || s.ColumnsAdded > 0 || s.ColumnsStored > 0 || s.ColumnsWidened > 0 || s.KeysOverflowed > 0 || s.KeysPromoted > 0
}

// Tx is one load: everything written through it is committed together by
// Commit, or not at all. A Tx is used by one goroutine.
type Tx struct {
	ctx        context.Context
	conn       *sql.Conn
	maxColumns int
	density    float64 // DB.ColumnDensity at Begin
	young      int     // DB.YoungColumns at Begin
	db         *DB
	tables     map[string]*table
	known      map[string]*table // state of tables from earlier committed loads
	run        *insertRun
	tune       tuning // DuckDB settings for wide tables (wide.go)
	// beforeDDL, when set, is called before the load creates or alters a
	// table; an error stops the Write (the Committer's pipelining).
	beforeDDL func() error
	done      bool
	// exclusive: no other writer transaction is open beside this one
	// (gate.go); gated: it entered the gate and has not left it.
	exclusive, gated bool
	// entered: the gate's count of ended transactions when this one
	// entered; fresh: it is exclusive and none ended since (gate.go).
	entered uint64
	fresh   bool
	// chunks: write through the C appender (chunks.go), not INSERT;
	// raw is conn's C handle, which both take (capi.go).
	chunks bool
	raw    mapping.Connection
	// updates are the UPDATEs of the running Write's widenings, run once
	// its DDL is done; updated holds the tables they rewrote, which no
	// later Write of the transaction may alter (errAltersUpdated).
	updates []string
	updated map[string]bool
	ddl     bool // startDDL was called: the commit changes a schema (DB.schemaGen)
	// strays are the stray values written, by table and key, for the
	// catalog at Commit (strays.go).
	strays map[*table]map[*shred.ColInfo]int64
}

// errAltersUpdated stops a Write that would alter a table an earlier Write
// of its transaction rewrote by UPDATE (a widening): DuckDB cannot commit
// an ALTER TABLE that follows an UPDATE of the same table in one
// transaction ("Attempting to modify table ... but another transaction has
// altered this table", on every retry), so the caller writes the batches
// in transactions of their own. An UPDATE after the ALTERs commits.
var errAltersUpdated = errors.New("a schema change of a table this transaction has rewritten")

// table is a table's state within a load.
type table struct {
	name   string
	tr     transforms.Transform
	core   []shred.CoreColumn
	schema *shred.Schema
	cols   []string               // table column order
	types  map[string]*shred.Type // by column name
	stats  *TableStats
	create bool // the table does not exist yet
	// virtual holds the deferred core columns that have no storage yet
	// (shredduck_virtual_columns): a batch leaves them out while it holds
	// only their default, and stores them (store) when it does not.
	virtual map[string]shred.CoreColumn
	// absent holds the on-demand core columns not in the table yet: a
	// batch with a value for one adds it.
	absent map[string]shred.CoreColumn
	// runCols are the columns of the last INSERT into the table; the next
	// one takes them too, so that sparse batches (NDJSON) with changing
	// columns do not restart the INSERT at every batch.
	runCols map[string]bool
	// gen is the DB's schemaGen the state was read or committed at.
	gen int64
}

// insertRun is one INSERT ... SELECT streaming records from a reader.
type insertRun struct {
	t      *table
	cols   map[string]bool
	schema *arrow.Schema
	types  []*shred.Type
	reader *streamReader
	view   *scanView
	done   chan error
	app    *chunkAppender // instead of reader, view and done
}

// Begin starts a load, with no other writer transaction beside it
// (gate.go). maxColumns limits dynamic columns per table (0: the
// default).
func (d *DB) Begin(ctx context.Context, maxColumns int) (*Tx, error) {
	return d.begin(ctx, maxColumns, true)
}

// begin starts a load; a shared one may run beside others until it
// changes a schema (startDDL).
func (d *DB) begin(ctx context.Context, maxColumns int, exclusive bool) (*Tx, error) {
	if maxColumns <= 0 {
		maxColumns = DefaultMaxColumns
	}
	entered := d.gate.enter(exclusive)
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		d.gate.leave(exclusive)
		return nil, err
	}
	tx := &Tx{ctx: ctx, conn: conn, maxColumns: maxColumns, density: d.ColumnDensity, young: d.YoungColumns, db: d, tables: make(map[string]*table),
		exclusive: exclusive, gated: true, entered: entered, fresh: exclusive}
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("not a duckdb-go connection: %T", dc)
		}
		var err error
		tx.raw, err = RawConn(c)
		return err
	})
	if err == nil {
		_, err = conn.ExecContext(ctx, "BEGIN TRANSACTION")
	}
	if err != nil {
		releaseConn(conn)
		tx.leaveGate()
		return nil, fmt.Errorf("cannot begin load: %w", err)
	}
	return tx, nil
}

// leaveGate lets other writer transactions in once this one has ended.
func (tx *Tx) leaveGate() {
	if tx.gated {
		tx.gated = false
		tx.db.gate.leave(tx.exclusive)
	}
}

// Stats returns the statistics of every table written so far.
func (tx *Tx) Stats() []*TableStats {
	out := make([]*TableStats, 0, len(tx.tables))
	for _, t := range tx.tables {
		out = append(out, t.stats)
	}
	return out
}

// Write inserts a finished batch made by transform tr into the named table,
// creating the table and evolving its schema as needed. The batch's memory
// is shared with DuckDB until DuckDB has consumed it: the caller must not
// touch the batch until done is called (done may be nil; it is called once,
// possibly from another goroutine, whether Write succeeds or not).
func (tx *Tx) Write(name string, tr transforms.Transform, b *shred.Batch, inputBytes int64, done func()) error {
	return tx.writeRows(name, tr, b, 0, b.Rows, inputBytes, done)
}

// writeRows is Write of the batch's rows [from, to).
func (tx *Tx) writeRows(name string, tr transforms.Transform, b *shred.Batch, from, to int, inputBytes int64, done func()) error {
	ref := newBatchRef(done)
	defer ref.release()
	if tx.done {
		return errors.New("load already finished")
	}
	t, err := tx.table(name, tr)
	if err != nil {
		return err
	}
	t.stats.Bytes += inputBytes
	if to <= from {
		return nil
	}
	if from == 0 {
		t.stats.DepthTruncated += b.Truncated
	}
	changes := t.schema.Plan(b)
	if len(changes) > 0 || t.create {
		if err := tx.startAlter(t); err != nil {
			return err
		}
		if err := tx.applyChanges(t, changes); err != nil {
			return err
		}
	}
	out := t.schema.Output(t.core, b)
	if err := tx.countStrays(t, b, from, to); err != nil {
		return err
	}
	var store, add []shred.CoreColumn
	for _, o := range out[:len(t.core)] {
		if c, ok := t.virtual[o.Name]; ok && !c.OnlyDefault(o.Col) {
			store = append(store, c)
		}
		if c, ok := t.absent[o.Name]; ok && o.Col.Nulls < o.Col.Len {
			add = append(add, c)
		}
	}
	if len(store)+len(add) > 0 {
		if err := tx.startAlter(t); err != nil {
			return err
		}
		if err := tx.storeColumns(t, store); err != nil {
			return err
		}
		if err := tx.addOnDemand(t, add); err != nil {
			return err
		}
	}
	if err := tx.runUpdates(t); err != nil {
		return err
	}
	cols := make(map[string]*shred.Column, len(out))
	for _, o := range out {
		if o.Col.Nulls == o.Col.Len {
			continue // all NULL: the INSERT leaves it out and DuckDB fills NULL
		}
		if _, ok := t.virtual[o.Name]; ok {
			continue // only the default, which the virtual column gives
		}
		if _, ok := t.absent[o.Name]; ok {
			continue // only NULLs, and the table has no such column yet
		}
		cols[o.Name] = o.Col
	}
	if r := tx.run; r != nil && (r.t != t || !covers(r.cols, cols)) {
		if err := tx.endRun(); err != nil {
			return err
		}
	}
	if tx.run == nil {
		if err := tx.startRun(t, cols); err != nil {
			return err
		}
	}
	r := tx.run
	rec := recordOf(r.schema, r.types, cols, b.Rows, ref)
	if from > 0 || to < b.Rows {
		part := rec.NewSlice(int64(from), int64(to))
		rec.Release()
		rec = part
	}
	if r.app != nil {
		err := r.app.append(rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("insert into %s: %w", t.name, err)
		}
		t.stats.Rows += int64(to - from)
		return nil
	}
	select {
	case r.reader.ch <- rec:
	case err := <-r.done:
		rec.Release()
		r.done <- err // endRun reads it again
		return tx.endRun()
	case <-tx.ctx.Done():
		rec.Release()
		return tx.ctx.Err()
	}
	t.stats.Rows += int64(to - from)
	return nil
}

// startAlter is startDDL for a change of t's columns.
func (tx *Tx) startAlter(t *table) error {
	if tx.updated[t.name] {
		return errAltersUpdated
	}
	return tx.startDDL()
}

// runUpdates runs the UPDATEs of t's widenings in this Write, after its
// ALTERs.
func (tx *Tx) runUpdates(t *table) error {
	for _, stmt := range tx.updates {
		if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
			return fmt.Errorf("cannot rewrite the widened values of %s (%s): %w", t.name, stmt, err)
		}
		if tx.updated == nil {
			tx.updated = make(map[string]bool)
		}
		tx.updated[t.name] = true
	}
	tx.updates = tx.updates[:0]
	return nil
}

// startDDL readies the load for a CREATE or ALTER TABLE: it asks
// beforeDDL, then ends the running insert.
func (tx *Tx) startDDL() error {
	if tx.beforeDDL != nil {
		if err := tx.beforeDDL(); err != nil {
			return err
		}
	}
	if !tx.exclusive {
		ok, fresh := tx.db.gate.upgrade(tx.entered)
		if !ok {
			return errExclusive
		}
		tx.exclusive, tx.fresh = true, fresh
	}
	tx.ddl = true
	return tx.endRun()
}

func covers(have map[string]bool, want map[string]*shred.Column) bool {
	for name := range want {
		if !have[name] {
			return false
		}
	}
	return true
}

// startRun begins an INSERT into t whose columns are those of the batch
// plus those of the previous run on t (so that alternating sparse batches
// do not restart it).
func (tx *Tx) startRun(t *table, cols map[string]*shred.Column) error {
	if err := tx.fitTable(t); err != nil {
		return fmt.Errorf("cannot configure DuckDB for table %s: %w", t.name, err)
	}
	names := make([]string, 0, len(cols))
	for _, c := range t.cols { // table order
		if cols[c] != nil || t.runCols[c] {
			names = append(names, c)
		}
	}
	fields := make([]arrow.Field, len(names))
	types := make([]*shred.Type, len(names))
	set := make(map[string]bool, len(names))
	quoted := make([]string, len(names))
	for i, n := range names {
		types[i] = t.types[n]
		fields[i] = arrow.Field{Name: n, Type: arrowType(types[i]), Nullable: true}
		set[n] = true
		quoted[i] = shred.QuoteIdent(n)
	}
	t.runCols = set
	r := &insertRun{t: t, cols: set, types: types, schema: arrow.NewSchema(fields, nil), done: make(chan error, 1)}
	if tx.chunks {
		app, err := newChunkAppender(tx.raw, t.name, r.schema)
		if err != nil {
			return fmt.Errorf("cannot append to %s: %w", t.name, err)
		}
		r.app = app
		tx.run = r
		return nil
	}
	r.reader = newStreamReader(r.schema)
	host, err := tx.db.viewHost(tx.ctx)
	if err != nil {
		return fmt.Errorf("cannot register arrow stream: %w", err)
	}
	view, err := host.register(tx.ctx, r.reader)
	if err != nil {
		return fmt.Errorf("cannot register arrow stream: %w", err)
	}
	r.view = view
	list := strings.Join(quoted, ", ")
	q := "INSERT INTO " + shred.QuoteIdent(t.name) + " (" + list + ") SELECT " + list + " FROM " + view.name
	go func() {
		// Not tx.ctx: a cancelled INSERT returns while DuckDB may still
		// hold the Arrow stream, which endRun then releases under it (the
		// next statement on the connection crashed in the stream's
		// callback). The INSERT ends when endRun closes the stream.
		_, err := tx.conn.ExecContext(context.Background(), q)
		r.done <- err
	}()
	tx.run = r
	return nil
}

// endRun finishes the current INSERT, if any, and returns its error.
func (tx *Tx) endRun() error {
	r := tx.run
	if r == nil {
		return nil
	}
	tx.run = nil
	if r.app != nil {
		if err := r.app.finish(); err != nil {
			return fmt.Errorf("insert into %s: %w", r.t.name, err)
		}
		return nil
	}
	close(r.reader.ch)
	err := <-r.done
	if derr := r.view.drop(); err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("insert into %s: %w", r.t.name, err)
	}
	return nil
}

// table returns the load's state for a table, creating or reading it.
func (tx *Tx) table(name string, tr transforms.Transform) (*table, error) {
	if t := tx.tables[name]; t != nil {
		if t.tr.Name() != tr.Name() {
			return nil, fmt.Errorf("table %s is written by transform %s, not %s", name, t.tr.Name(), tr.Name())
		}
		return t, nil
	}
	if err := tx.endRun(); err != nil {
		return nil, err
	}
	// A state from an earlier transaction holds only if no writer has
	// changed a schema since: another writer's widening or new column
	// would otherwise be met with a stale plan (an ALTER DuckDB refuses, a
	// value cast by DuckDB rather than rendered by shred). No schema
	// change commits while this transaction is open (gate.go).
	if k := tx.known[name]; k != nil && k.tr == tr && k.gen == tx.db.schemaGen.Load() {
		k.stats = &TableStats{Table: name, Transform: tr.Name()}
		tx.tables[name] = k
		return k, nil
	}
	t := &table{
		name: name, tr: tr, core: tr.Core(),
		schema: shred.NewSchema(tr.Core(), tr.Overflow(), tx.maxColumns),
		types:  make(map[string]*shred.Type),
		stats:  &TableStats{Table: name, Transform: tr.Name()},
		gen:    tx.db.schemaGen.Load(),
	}
	if p, ok := tr.(interface{ PathKeys() bool }); ok {
		t.schema.PathKeys = p.PathKeys()
	}
	t.schema.Density = tx.density
	t.schema.Young = tx.young
	t.schema.Counts = tx.db.keyCounts(name)
	if err := tx.capColumns(t); err != nil {
		return nil, err
	}
	for _, c := range t.core {
		t.cols = append(t.cols, c.Name)
		t.types[c.Name] = c.Type
	}
	var existing string
	err := tx.conn.QueryRowContext(tx.ctx, "SELECT transform FROM shredduck_tables WHERE table_name = ?", name).Scan(&existing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		t.create = true // with the first batch's columns, in applyChanges
	case err != nil:
		return nil, err
	case existing != tr.Name():
		return nil, fmt.Errorf("table %s holds %s data; it cannot take %s", name, existing, tr.Name())
	default:
		if err := tx.loadCatalog(t); err != nil {
			return nil, err
		}
	}
	tx.tables[name] = t
	return t, nil
}

// Create makes table name for transform tr with its core columns only,
// unless it exists, so that queries find it before any data has come.
func (tx *Tx) Create(name string, tr transforms.Transform) error {
	t, err := tx.table(name, tr)
	if err != nil || !t.create {
		return err
	}
	if err := tx.startDDL(); err != nil {
		return err
	}
	return tx.createTable(t, nil)
}

// createTable creates t with its core columns and the given dynamic
// columns in one statement: for a wide first batch that is much cheaper
// than one ALTER per column.
func (tx *Tx) createTable(t *table, dyn []*shred.ColInfo) error {
	var sb strings.Builder
	sb.WriteString("CREATE TABLE " + shred.QuoteIdent(t.name) + " (")
	var virtual []string
	first := true
	for _, c := range t.core {
		if c.OnDemand {
			continue
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		if !c.Deferred {
			sb.WriteString(shred.QuoteIdent(c.Name) + " " + c.Type.SQL())
		} else {
			vt := virtualTypeSQL(c.Type) // replayable (walsafe.go)
			sb.WriteString(shred.QuoteIdent(c.Name) + " " + vt)
			sb.WriteString(" GENERATED ALWAYS AS (CAST(" + c.DefaultSQL() + " AS " + vt + ")) VIRTUAL")
			virtual = append(virtual, c.Name)
		}
	}
	for _, ci := range dyn {
		sb.WriteString(", " + shred.QuoteIdent(ci.Name) + " " + shred.ScalarType(ci.Kind).SQL())
	}
	sb.WriteString(")")
	if _, err := tx.conn.ExecContext(tx.ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot create table %s: %w", t.name, err)
	}
	if _, err := tx.conn.ExecContext(tx.ctx, "INSERT INTO shredduck_tables (table_name, transform) VALUES (?, ?)", t.name, t.tr.Name()); err != nil {
		return err
	}
	if len(virtual) > 0 {
		args := make([]any, 0, 2*len(virtual))
		for _, name := range virtual {
			args = append(args, t.name, name)
		}
		q := "INSERT INTO shredduck_virtual_columns (table_name, column_name) VALUES (?, ?)" + strings.Repeat(", (?, ?)", len(virtual)-1)
		if _, err := tx.conn.ExecContext(tx.ctx, q, args...); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	t.virtual = make(map[string]shred.CoreColumn, len(virtual))
	t.absent = make(map[string]shred.CoreColumn)
	for _, c := range t.core {
		if c.Deferred {
			t.virtual[c.Name] = c
		}
		if c.OnDemand {
			t.absent[c.Name] = c
		}
	}
	t.create = false
	t.stats.Created = true
	return nil
}

// storeColumns gives deferred columns of t storage: each virtual column
// is dropped and added back as a stored column whose default is the
// value the virtual one gave, so the rows already in the table read the
// same. The column moves to the end of the table (SELECT * order).
func (tx *Tx) storeColumns(t *table, cols []shred.CoreColumn) error {
	tq := shred.QuoteIdent(t.name)
	for _, c := range cols {
		col := shred.QuoteIdent(c.Name)
		add := "ALTER TABLE " + tq + " ADD COLUMN " + col + " " + c.Type.SQL()
		if c.Zero {
			add += " DEFAULT " + c.DefaultSQL()
		}
		for _, stmt := range []string{"ALTER TABLE " + tq + " DROP COLUMN " + col, add} {
			if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
				return fmt.Errorf("cannot store column %s of %s (%s): %w", c.Name, t.name, stmt, err)
			}
		}
		if _, err := tx.conn.ExecContext(tx.ctx, "DELETE FROM shredduck_virtual_columns WHERE table_name = ? AND column_name = ?", t.name, c.Name); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		delete(t.virtual, c.Name)
		t.stats.ColumnsStored++
	}
	return nil
}

// addOnDemand adds on-demand core columns to t for their first value; the
// rows already in the table read NULL.
func (tx *Tx) addOnDemand(t *table, cols []shred.CoreColumn) error {
	for _, c := range cols {
		stmt := "ALTER TABLE " + shred.QuoteIdent(t.name) + " ADD COLUMN " + shred.QuoteIdent(c.Name) + " " + c.Type.SQL()
		if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
			return fmt.Errorf("cannot add column %s to %s (%s): %w", c.Name, t.name, stmt, err)
		}
		delete(t.absent, c.Name)
		t.stats.ColumnsStored++
	}
	return nil
}

func (tx *Tx) loadCatalog(t *table) error {
	rows, err := tx.conn.QueryContext(tx.ctx, "SELECT column_name FROM shredduck_virtual_columns WHERE table_name = ?", t.name)
	if err != nil {
		return err
	}
	virtual := make(map[string]bool)
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		virtual[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	t.virtual = make(map[string]shred.CoreColumn, len(virtual))
	for _, c := range t.core {
		if virtual[c.Name] {
			t.virtual[c.Name] = c
		}
	}
	have, err := tableColumns(tx.ctx, tx.conn, t.name)
	if err != nil {
		return err
	}
	t.absent = make(map[string]shred.CoreColumn)
	for _, c := range t.core {
		if c.OnDemand && !have[strings.ToLower(c.Name)] {
			t.absent[c.Name] = c
		}
	}
	rows, err = tx.conn.QueryContext(tx.ctx, `SELECT column_name, level, key, type, overflow, promoted IS NOT NULL FROM shredduck_columns
		WHERE table_name = ? ORDER BY first_seen, rowid`, t.name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ci shred.ColInfo
		var level, typ string
		if err := rows.Scan(&ci.Name, &level, &ci.Key, &typ, &ci.Overflow, &ci.Promoted); err != nil {
			return err
		}
		var ok bool
		if ci.Level, ok = shred.ParseLevel(level); !ok {
			return fmt.Errorf("catalog of %s: unknown level %q", t.name, level)
		}
		ci.Kind = shred.KindFromSQL(typ)
		switch {
		case ci.Overflow && (ci.Name == t.tr.Overflow()[ci.Level] || ci.Kind == shred.Null):
			ci.Legacy, ci.Kind = true, shred.Null
		case !ci.Overflow:
			t.cols = append(t.cols, ci.Name)
			t.types[ci.Name] = shred.ScalarType(ci.Kind)
		}
		t.schema.Load(ci)
	}
	return rows.Err()
}

// applyChanges runs the DDL for a batch's new and widened columns (or
// creates the table) and records them in the catalog.
func (tx *Tx) applyChanges(t *table, changes []shred.Change) error {
	var adds []*shred.ColInfo
	var catalog []any // rows of (column_name, level, key, type, overflow)
	var ddl []string
	tq := shred.QuoteIdent(t.name)
	var promoted []*shred.ColInfo
	for _, ch := range changes {
		ci := ch.Col
		switch {
		case ch.Add && ci.Overflow:
			t.stats.KeysOverflowed++
			catalog = append(catalog, ci.Name, ci.Level.String(), ci.Key, shred.ScalarType(ci.Kind).SQL(), true)
		case ch.Add || ch.Promote:
			typ := shred.ScalarType(ci.Kind)
			adds = append(adds, ci)
			if !t.create {
				ddl = append(ddl, "ALTER TABLE "+tq+" ADD COLUMN "+shred.QuoteIdent(ci.Name)+" "+typ.SQL())
			}
			if ch.Promote {
				promoted = append(promoted, ci)
				t.stats.KeysPromoted++
			} else {
				catalog = append(catalog, ci.Name, ci.Level.String(), ci.Key, typ.SQL(), false)
				t.stats.ColumnsAdded++
			}
			t.cols = append(t.cols, ci.Name)
			t.types[ci.Name] = typ
		case ci.Overflow: // the type it reads as; its values keep theirs
			if err := tx.retype(t, ci, ch.From); err != nil {
				return err
			}
		default: // widen
			if err := tx.widen(t, ch); err != nil {
				return err
			}
		}
	}
	if err := tx.fitBeforeDDL(t); err != nil {
		return err
	}
	if t.create {
		if err := tx.createTable(t, adds); err != nil {
			return err
		}
	}
	for _, stmt := range ddl {
		if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
			return fmt.Errorf("cannot add a column to %s (%s): %w", t.name, stmt, err)
		}
	}
	for _, ci := range promoted {
		if err := tx.backfill(t, ci); err != nil {
			return err
		}
		if _, err := tx.conn.ExecContext(tx.ctx, `UPDATE shredduck_columns SET overflow = false, type = ?, promoted = now()
			WHERE table_name = ? AND level = ? AND key = ?`, shred.ScalarType(ci.Kind).SQL(), t.name, ci.Level.String(), ci.Key); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	}
	return tx.insertCatalog(t, catalog)
}

// backfill copies the values a promoted key has in the overflow, from the
// rows before its column, into the new column, in the transaction that
// adds it: a plain DuckDB or Parquet reader, which knows nothing of the
// overflow, sees the whole column, never the part after the promotion
// (count() was 5,000 of 5,010 before). The overflow keeps its copy, which
// shredduck's readers no longer need. It reads every row, so it needs a
// snapshot with every other writer's rows, as a widening does.
func (tx *Tx) backfill(t *table, ci *shred.ColInfo) error {
	if !tx.fresh {
		return errExclusive
	}
	have, err := tableColumns(tx.ctx, tx.conn, t.name)
	if err != nil {
		return fmt.Errorf("cannot read the columns of %s: %w", t.name, err)
	}
	expr := overflowExpr(t.tr.Overflow()[ci.Level], ci.Key, ci.Kind, have)
	stmt := fmt.Sprintf("UPDATE %s SET %s = %s WHERE (%s) IS NOT NULL", shred.QuoteIdent(t.name), shred.QuoteIdent(ci.Name), expr, expr)
	if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
		return fmt.Errorf("cannot move the overflowed values of %s into its new column %s of %s: %w", ci.Key, ci.Name, t.name, err)
	}
	return nil
}

// retype records the wider type an overflowed key reads as: its values
// stay in the overflow under their own kinds, so only the catalog changes.
func (tx *Tx) retype(t *table, ci *shred.ColInfo, from shred.Kind) error {
	if _, err := tx.conn.ExecContext(tx.ctx, `UPDATE shredduck_columns SET type = ?,
		widened_from = CASE WHEN widened_from IS NULL THEN ? ELSE widened_from || ',' || ? END
		WHERE table_name = ? AND level = ? AND key = ?`,
		shred.ScalarType(ci.Kind).SQL(), from.String(), from.String(), t.name, ci.Level.String(), ci.Key); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

// insertCatalog records new keys in one INSERT of lists bound as
// parameters: as a multi-row VALUES, 5,000 keys took DuckDB 0.37 s with a
// parameter per value and 0.27 s as literals, as lists 15 ms.
func (tx *Tx) insertCatalog(t *table, rows []any) error {
	const cols = 5
	if len(rows) == 0 {
		return nil
	}
	n := len(rows) / cols
	names, levels, keys, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	overflow := make([]bool, n)
	for i := range n {
		r := rows[i*cols : (i+1)*cols]
		names[i], levels[i], keys[i], types[i], overflow[i] = r[0].(string), r[1].(string), r[2].(string), r[3].(string), r[4].(bool)
	}
	if _, err := tx.conn.ExecContext(tx.ctx, `INSERT INTO shredduck_columns (table_name, column_name, level, key, type, overflow)
		SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::BOOLEAN[])`,
		t.name, names, levels, keys, types, overflow); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

// widen changes a column's type. The values already stored keep their
// text (docs/SCHEMA.md, section 5.4): DuckDB's casts where they render as
// shred.AppendText does, otherwise an expression that does (widenUsing),
// in statements DuckDB can replay from its log (widenStatements).
// A BIGINT column with a value beyond ±2^53 stays BIGINT rather than
// become DOUBLE, which could not hold it exactly: the doubles are strays.
func (tx *Tx) widen(t *table, ch shred.Change) error {
	if !tx.fresh {
		return errExclusive // another writer's rows may be missing from this snapshot (gate.go)
	}
	ci := ch.Col
	col := shred.QuoteIdent(ci.Name)
	tq := shred.QuoteIdent(t.name)
	if ch.From == shred.Int64 && ci.Kind == shred.Double {
		var inexact bool
		q := fmt.Sprintf("SELECT count(*) > 0 FROM %s WHERE %s NOT BETWEEN %d AND %d", tq, col, -shred.MaxExactInt, shred.MaxExactInt)
		if err := tx.conn.QueryRowContext(tx.ctx, q).Scan(&inexact); err != nil {
			return fmt.Errorf("cannot check column %s of %s before widening: %w", ci.Name, t.name, err)
		}
		if inexact {
			// A DOUBLE could not hold them all: the column stays BIGINT,
			// and the batch's doubles are strays (Output sends them to
			// the overflow), as are those of later batches.
			ci.Kind, ci.BeyondDouble = shred.Int64, true
			return nil
		}
	}
	typ := shred.ScalarType(ci.Kind)
	stmts, update, err := tx.widenStatements(t, col, ci.Name, ch.From, typ)
	if err != nil {
		return err
	}
	if update != "" {
		tx.updates = append(tx.updates, update)
	}
	for _, stmt := range stmts {
		if _, err := tx.conn.ExecContext(tx.ctx, stmt); err != nil {
			return fmt.Errorf("cannot widen column %s of %s from %s to %s (%s): %w", ci.Name, t.name, ch.From, typ.SQL(), stmt, err)
		}
	}
	if err := tx.retype(t, ci, ch.From); err != nil {
		return err
	}
	t.types[ci.Name] = typ
	t.stats.ColumnsWidened++
	return nil
}

// widenStatements returns the SQL that widens column name (quoted: col)
// of t from kind from to typ, and the UPDATE that rewrites its values
// ("" if none), to be run after the batch's other DDL (errAltersUpdated).
// An ALTER that needs a catalog lookup to bind cannot be replayed from
// DuckDB's log (walsafe.go), so:
//   - where a plain cast gives the text form, or gives text that casts
//     back exactly, the column is cast and then rewritten by the UPDATE;
//   - to JSON, or from timestamps (whose text in a time zone with a
//     seconds offset does not cast back exactly), the column is renamed
//     aside, a new one added and filled from it; the old one is dropped
//     at the next Open (shredduck_widened_columns).
func (tx *Tx) widenStatements(t *table, col, name string, from shred.Kind, typ *shred.Type) ([]string, string, error) {
	tq := shred.QuoteIdent(t.name)
	to := typ.DynKind()
	beside := to == shred.JSON || from == shred.TimestampTZ || (from.IsList() && from.Elem() == shred.TimestampTZ)
	if !beside {
		var update string
		if u := widenUsing("CAST("+col+" AS "+shred.ScalarType(from).SQL()+")", from, to); u != "" {
			update = "UPDATE " + tq + " SET " + col + " = " + u
		}
		return []string{"ALTER TABLE " + tq + " ALTER COLUMN " + col + " SET DATA TYPE " + typ.SQL()}, update, nil
	}
	var old string
	for i := 1; ; i++ {
		old = fmt.Sprintf("%s (before widening %d)", name, i)
		var taken bool
		if err := tx.conn.QueryRowContext(tx.ctx, `SELECT count(*) > 0 FROM duckdb_columns()
			WHERE database_name = current_database() AND schema_name = current_schema()
			AND table_name = ? AND lower(column_name) = lower(?)`, t.name, old).Scan(&taken); err != nil {
			return nil, "", fmt.Errorf("cannot name the column to widen %s of %s: %w", name, t.name, err)
		}
		if !taken {
			break
		}
	}
	oq := shred.QuoteIdent(old)
	expr := oq
	if u := widenUsing(oq, from, to); u != "" {
		expr = u
	}
	return []string{
		"ALTER TABLE " + tq + " RENAME COLUMN " + col + " TO " + oq,
		"ALTER TABLE " + tq + " ADD COLUMN " + col + " " + typ.SQL(),
		"INSERT INTO shredduck_widened_columns (table_name, column_name) VALUES (" + shred.QuoteString(t.name) + ", " + shred.QuoteString(old) + ")",
	}, "UPDATE " + tq + " SET " + col + " = CAST(" + expr + " AS " + typ.SQL() + ")", nil
}

// Commit finishes the running insert and commits the load. On failure
// nothing is committed and the connection is rolled back (txconn.go).
func (tx *Tx) Commit() (err error) {
	if tx.done {
		return errors.New("load already finished")
	}
	tx.done = true
	defer func() { tx.release(err != nil) }()
	if err := tx.endRun(); err != nil {
		return err
	}
	if err := tx.writeStrays(); err != nil {
		return err
	}
	if err := tx.beforeCommit(); err != nil {
		return err
	}
	// Once the database is known invalidated nothing commits, as DuckDB
	// then refuses every statement (and MarkInvalidated, the tests' seam,
	// behaves as DuckDB would).
	if err := tx.db.InvalidatedErr(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	// A commit that changes what KeyColumns reads moves the key catalog's
	// generation on before its COMMIT and after (DB.KeysGen).
	keys := tx.ddl || len(tx.strays) > 0
	if keys {
		tx.db.keysGen.Add(1)
	}
	// Not cancellable: DuckDB may apply a COMMIT it reports interrupted
	// (TestLoadCancelled), which would fail a load it stored.
	_, err = tx.conn.ExecContext(context.WithoutCancel(tx.ctx), commitStatement)
	if keys {
		tx.db.keysGen.Add(1)
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tx.ddl {
		gen := tx.db.schemaGen.Add(1)
		for _, t := range tx.tables {
			t.gen = gen
		}
	}
	return nil
}

// Rollback discards the load. It is safe after Commit (a no-op).
func (tx *Tx) Rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	defer tx.release(true)
	if r := tx.run; r != nil && r.app != nil {
		r.app.discard() // rolled back below: no need to flush it first
		tx.run = nil
	}
	tx.endRun()
	return nil
}

// tableColumns returns the lower-cased names of table's columns.
func tableColumns(ctx context.Context, q Queryer, table string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT lower(column_name) FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = current_schema() AND table_name = ?`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := make(map[string]bool)
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		have[c] = true
	}
	return have, rows.Err()
}
