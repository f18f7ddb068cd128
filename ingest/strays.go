package ingest

import (
	"fmt"

	"github.com/shredduck/shredduck/shred"
)

// Stray values (docs/SCHEMA.md, 5.6): a value whose kind its key's stored
// column would take only by a lossy widening (a string under a BIGINT key)
// goes to the overflow under its key, and the column keeps its type. The
// load counts them by key in the catalog (shredduck_columns.strays) and by
// table in TableStats.Strays.

// countStrays counts the stray values of rows [from, to) of b, planned and
// output for t, to be added to the catalog at Commit. The UPDATE of the
// catalog's rows would conflict with another writer's of the same rows,
// so a transaction with strays goes on exclusive (gate.go), as one that
// changes a schema does: strays are rare by nature.
func (tx *Tx) countStrays(t *table, b *shred.Batch, from, to int) error {
	counts := t.schema.StrayCounts(b, from, to)
	if len(counts) == 0 {
		return nil
	}
	if !tx.exclusive {
		ok, fresh := tx.db.gate.upgrade(tx.entered)
		if !ok {
			return errExclusive
		}
		tx.exclusive, tx.fresh = true, fresh
	}
	if tx.strays == nil {
		tx.strays = make(map[*table]map[*shred.ColInfo]int64)
	}
	m := tx.strays[t]
	if m == nil {
		m = make(map[*shred.ColInfo]int64)
		tx.strays[t] = m
	}
	for _, c := range counts {
		m[c.Col] += int64(c.N)
		t.stats.Strays += int64(c.N)
	}
	return nil
}

// writeStrays adds the transaction's stray counts to the catalog, one
// UPDATE per table, before its COMMIT.
func (tx *Tx) writeStrays() error {
	for t, m := range tx.strays {
		var levels, keys []string
		var ns []int64
		for ci, n := range m {
			levels, keys, ns = append(levels, ci.Level.String()), append(keys, ci.Key), append(ns, n)
		}
		if _, err := tx.conn.ExecContext(tx.ctx, `UPDATE shredduck_columns c SET strays = coalesce(c.strays, 0) + s.n
			FROM (SELECT unnest(?::VARCHAR[]) AS level, unnest(?::VARCHAR[]) AS key, unnest(?::BIGINT[]) AS n) s
			WHERE c.table_name = ? AND c.level = s.level AND c.key = s.key`, levels, keys, ns, t.name); err != nil {
			return fmt.Errorf("catalog: cannot count the stray values of %s: %w", t.name, err)
		}
	}
	return nil
}
