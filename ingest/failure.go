package ingest

import (
	"context"
	"errors"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Why a submission failed decides what its client is told: OTLP clients
// retry only 429, 502, 503 and 504 and drop the data on anything else, so
// a failure that may pass (DuckDB out of memory while queries run, a full
// disk, a transaction conflict) must say so, and only a submission whose
// own data cannot be stored may be refused for good.

// ErrUnavailable is wrapped by the errors of submissions that failed
// because the database could not commit then: out of memory, an I/O error
// (a full disk, an unwritable directory), a conflict, an interruption, a
// database DuckDB invalidated. The same submission may commit later.
var ErrUnavailable = errors.New("the database cannot commit now")

// ErrRejected is wrapped by the errors of submissions whose own data
// cannot be stored (a table it would make wider than the memory limit
// allows): sent again, it would fail again.
var ErrRejected = errors.New("the data cannot be stored")

// classError puts err in a class (ErrUnavailable or ErrRejected) without
// changing its message.
type classError struct{ class, err error }

func (e *classError) Error() string   { return e.err.Error() }
func (e *classError) Unwrap() []error { return []error{e.class, e.err} }

// rejected marks err as caused by the submission's data.
func rejected(err error) error { return &classError{ErrRejected, err} }

// classify marks a failed submission's error ErrUnavailable when DuckDB
// failed for a reason that passes; an error already classed, or of no
// known class, is returned as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrRejected) || errors.Is(err, ErrUnavailable) {
		return err
	}
	if refusedData(err) {
		return rejected(err)
	}
	if !transient(err) {
		return err
	}
	return &classError{ErrUnavailable, err}
}

// refusedData reports DuckDB refusing a value (text that is not UTF-8, a
// number out of its column's range): the data's fault, which no retry
// mends. A loader that retried it stalled every record behind it.
func refusedData(err error) bool {
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return false
	}
	switch de.Type {
	case duckdb.ErrorTypeInvalidInput, duckdb.ErrorTypeConversion, duckdb.ErrorTypeOutOfRange, duckdb.ErrorTypeMismatchType:
		return true
	}
	return false
}

// transientTexts are found in DuckDB's messages of passing failures that
// reach us untyped or under another type: a failed COMMIT is a
// "TransactionContext Error: Failed to commit: <the cause>".
var transientTexts = []string{
	"could not allocate", "failed to allocate", "failed to pin block", "Out of Memory",
	"No space left on device", "File too large", "Disk quota exceeded", "Could not write file", "Cannot open file",
}

func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypeOutOfMemory, duckdb.ErrorTypeIO, duckdb.ErrorTypeTransaction,
			duckdb.ErrorTypeInterrupt, duckdb.ErrorTypeFatal, duckdb.ErrorTypeConnection:
			return true
		}
	}
	msg := err.Error()
	for _, s := range transientTexts {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
