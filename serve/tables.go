package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/transforms"
)

// Which table a request writes. DuckDB compares identifiers
// case-insensitively, the catalog (shredduck_tables) does not: every name
// is mapped to the spelling the table was created with before it reaches
// the committer, which looks tables up by that spelling.
//
// The routing tables (--traces-table, --logs-table, --metrics-table, and
// the default otel_* names, which `shredduck ingest` routes to) are
// reserved for their signal, the shredduck_* catalog and DuckDB's system
// names for nobody (ingest.CheckTable); NDJSON asking for them gets 400.

// tableName is what a table in a URL (or a routing flag) may be.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// checkTableName rejects names that are not plain identifiers, and those
// no transform may write.
func checkTableName(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("table name %q is not a plain identifier (letters, digits and _, not starting with a digit, at most 63)", name)
	}
	return ingest.SystemTable(name)
}

// tableEntry is a table the server has seen: its spelling and transform.
type tableEntry struct {
	name      string
	transform string
}

// routeSignals checks the routing tables and maps each to the catalog's
// spelling. A routing table that already holds another transform's data
// does not stop the server (a client must not be able to do that, and a
// database from before names were reserved may be in that state): the
// signal is answered 503 with the reason until the operator routes it
// elsewhere.
func (s *Server) routeSignals(ctx context.Context) error {
	seen := make(map[string]string)
	for _, sig := range s.signals {
		if err := checkTableName(sig.table); err != nil {
			return fmt.Errorf("%s table: %w", sig.name, err)
		}
		if err := ingest.CheckTable(sig.table, sig.tr.Name()); err != nil {
			return fmt.Errorf("%s table: %w", sig.name, err)
		}
		lower := strings.ToLower(sig.table)
		if other, ok := seen[lower]; ok {
			return fmt.Errorf("%s and %s cannot share table %s", other, sig.name, sig.table)
		}
		seen[lower] = sig.name
		stored, transform, err := s.db.StoredTable(ctx, sig.table)
		if err != nil {
			return fmt.Errorf("%s table: %w", sig.name, err)
		}
		switch {
		case stored == "":
		case transform != sig.tr.Name():
			sig.conflict = &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonTableConflict,
				retryAfter: s.cfg.RetryAfter,
				msg: fmt.Sprintf("this server cannot store %s: its table %s holds %s data; restart it with --%s-table naming another table",
					sig.name, stored, transform, sig.name)}
			s.log.Error("routing table holds another transform's data; its signal is refused with 503",
				slog.String("signal", sig.name), slog.String("table", stored), slog.String("transform", transform))
			continue
		default:
			sig.table = stored
		}
		s.tables.Store(lower, tableEntry{sig.table, sig.tr.Name()})
	}
	return nil
}

// tableFor returns the table an NDJSON body of transform tr for table
// goes to: the routing table's or the catalog's spelling of it, or the
// name itself for a new table. It refuses reserved names (400) and tables
// of another transform (409).
func (s *Server) tableFor(ctx context.Context, table string, tr transforms.Transform) (string, *apiError) {
	reserved := func(err error) *apiError {
		return &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadTable, msg: err.Error()}
	}
	if err := ingest.CheckTable(table, tr.Name()); err != nil {
		return "", reserved(err)
	}
	for _, sig := range s.signals {
		if strings.EqualFold(table, sig.table) && sig.tr.Name() != tr.Name() {
			return "", reserved(fmt.Errorf("%w: %s is this server's %s table (transform %s), not one for %s",
				ingest.ErrReservedTable, table, sig.name, sig.tr.Name(), tr.Name()))
		}
	}
	lower := strings.ToLower(table)
	e, ok := s.tables.Load(lower)
	if !ok {
		stored, transform, err := s.db.StoredTable(ctx, table)
		if err != nil {
			return "", &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonUnavailable,
				retryAfter: s.cfg.RetryAfter, msg: err.Error()}
		}
		if stored == "" {
			stored, transform = table, tr.Name()
		}
		// Two requests for a new table in different spellings: the
		// first one names it.
		e, _ = s.tables.LoadOrStore(lower, tableEntry{stored, transform})
	}
	te := e.(tableEntry)
	if te.transform != tr.Name() {
		return "", &apiError{status: http.StatusConflict, code: codeFailedPrecondition, reason: reasonTableConflict,
			msg: fmt.Sprintf("table %s holds %s data; it cannot take %s", te.name, te.transform, tr.Name())}
	}
	return te.name, nil
}

// createRoutingTables creates the routing tables that do not exist yet,
// empty, so that a fresh server answers queries on them (0 rows) instead
// of a catalog error naming a missing table.
func (s *Server) createRoutingTables(ctx context.Context) (err error) {
	tx, err := s.db.Begin(ctx, s.cfg.MaxColumns)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	for _, sig := range s.signals {
		if sig.conflict != nil {
			continue
		}
		if err := tx.Create(sig.table, sig.tr); err != nil {
			return fmt.Errorf("cannot create the %s table %s: %w", sig.name, sig.table, err)
		}
	}
	return tx.Commit()
}
