package ingest

import (
	"context"
	"database/sql"
	"database/sql/driver"
)

// A load's connection goes back to the pool only with no transaction
// open. When DuckDB is out of memory, a COMMIT can fail before it ends
// the transaction and the ROLLBACK after it can fail too; a connection
// returned in that state failed every later BEGIN on it with "Current
// transaction is aborted" (114 requests in a row under heavy queries).
// So after a failure the connection is rolled back, then checked by
// starting and ending a transaction, and discarded if either fails.

// commitStatement and rollbackStatement end a load's transaction; tests
// replace them with statements that fail and abort the transaction, as
// COMMIT and ROLLBACK do when DuckDB cannot allocate.
var (
	commitStatement   = "COMMIT"
	rollbackStatement = "ROLLBACK"
)

// release ends a load's use of its connection: after a failure (failed:
// its transaction may still be open, whatever failed, COMMIT included) it
// rolls back, before untune's SETs, which an aborted transaction refuses;
// then the connection goes back to the pool, or is discarded.
func (tx *Tx) release(failed bool) {
	defer tx.leaveGate()
	clean := !failed || rolledBack(tx.conn)
	tx.untune()
	if !clean {
		discardConn(tx.conn)
		return
	}
	tx.conn.Close()
}

// releaseConn gives back a connection that holds no load yet (BEGIN
// failed).
func releaseConn(conn *sql.Conn) {
	if !rolledBack(conn) {
		discardConn(conn)
		return
	}
	conn.Close()
}

// rolledBack rolls back conn's transaction, if any, and reports whether
// conn is then verifiably outside one.
func rolledBack(conn *sql.Conn) bool {
	ctx := context.Background()
	// Its error does not matter: a failed COMMIT has usually rolled back
	// already, and then there is nothing to roll back.
	conn.ExecContext(ctx, rollbackStatement)
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return false
	}
	_, err := conn.ExecContext(ctx, "ROLLBACK")
	return err == nil
}

// discardConn closes conn's DuckDB connection instead of pooling it;
// closing a DuckDB connection rolls back whatever it had open.
func discardConn(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
