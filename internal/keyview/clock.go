package keyview

import (
	"context"
	"errors"
	"fmt"

	"github.com/shredduck/shredduck/shred"
)

// The time columns are TIMESTAMP_NS in UTC (DuckDB 1.5 has no
// TIMESTAMPTZ with nanoseconds), and DuckDB will not compare them with
// the TIMESTAMP WITH TIME ZONE that now() and current_timestamp return:
// "start_time > now() - INTERVAL 1 HOUR" is a binder error, and casting
// now() to TIMESTAMP gives the session's wall clock, wrong outside UTC.
// For a query that calls them, the clock functions are therefore shadowed
// by temporary macros that return the current instant as a UTC TIMESTAMP,
// which compares with the time columns exactly, in every time zone.
// (A bare current_timestamp binds to get_current_timestamp().)
var clocks = []string{"now", "get_current_timestamp", "transaction_timestamp"}

// clockMacros returns the clocks refs call or names (current_timestamp).
func clockMacros(refs Refs) []string {
	var out []string
	for _, f := range clocks {
		if refs.Functions[f] || (f == "get_current_timestamp" && refs.Columns["current_timestamp"]) {
			out = append(out, f)
		}
	}
	return out
}

// macroSQL shadows the clock f by the same instant as a UTC TIMESTAMP.
func macroSQL(f string) string {
	return "CREATE OR REPLACE TEMP MACRO " + shred.QuoteIdent(f) + "() AS timezone('UTC', system.main." + shred.QuoteIdent(f) + "())"
}

// createClocks creates the macros of clockMacros(refs) on v's connection.
func (v *Views) createClocks(ctx context.Context, refs Refs) error {
	for _, f := range clockMacros(refs) {
		if _, err := v.c.ExecContext(ctx, macroSQL(f)); err != nil {
			return fmt.Errorf("cannot make %s() a UTC TIMESTAMP: %w", f, err)
		}
		v.macros = append(v.macros, f)
	}
	return nil
}

func (v *Views) dropClocks(ctx context.Context) error {
	var errs []error
	for _, f := range v.macros {
		if _, err := v.c.ExecContext(ctx, "DROP MACRO IF EXISTS temp.main."+shred.QuoteIdent(f)); err != nil {
			errs = append(errs, fmt.Errorf("cannot drop the temporary macro %s: %w", f, err))
		}
	}
	v.macros = nil
	return errors.Join(errs...)
}
