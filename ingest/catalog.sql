-- shredduck's catalog: which transform made each table, and where every
-- attribute key of every table is stored. See docs/SCHEMA.md.
CREATE TABLE IF NOT EXISTS shredduck_tables (
    table_name VARCHAR PRIMARY KEY,
    transform  VARCHAR NOT NULL,
    created    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS shredduck_columns (
    table_name   VARCHAR NOT NULL,
    column_name  VARCHAR NOT NULL,
    level        VARCHAR NOT NULL,
    key          VARCHAR NOT NULL,
    type         VARCHAR NOT NULL,
    overflow     BOOLEAN NOT NULL DEFAULT false,
    first_seen   TIMESTAMPTZ NOT NULL DEFAULT now(),
    widened_from VARCHAR,
    -- when an overflowed key got its stored column (its earlier values
    -- stay in the overflow); NULL for a key stored from the start
    promoted     TIMESTAMPTZ,
    -- values of the key stored in the overflow beside its column, because
    -- the column would take them only by a lossy widening (strays)
    strays       BIGINT DEFAULT 0,
    PRIMARY KEY (table_name, level, key)
);
ALTER TABLE shredduck_columns ADD COLUMN IF NOT EXISTS promoted TIMESTAMPTZ;
ALTER TABLE shredduck_columns ADD COLUMN IF NOT EXISTS strays BIGINT DEFAULT 0;
-- Deferred core columns (shred.CoreColumn.Deferred) that are still virtual:
-- GENERATED ALWAYS AS their default, no storage. A column leaves this table
-- when it is stored (dropped and added back) for its first other value.
-- Tables made before deferred columns existed have no rows here.
CREATE TABLE IF NOT EXISTS shredduck_virtual_columns (
    table_name  VARCHAR NOT NULL,
    column_name VARCHAR NOT NULL,
    PRIMARY KEY (table_name, column_name)
);
-- Columns a widening renamed and replaced (ingest/walsafe.go): dropped at
-- the next Open, in a transaction of their own.
CREATE TABLE IF NOT EXISTS shredduck_widened_columns (
    table_name  VARCHAR NOT NULL,
    column_name VARCHAR NOT NULL,
    PRIMARY KEY (table_name, column_name)
);
-- Facts about the file: schema_version (ingest/upgrade.go).
CREATE TABLE IF NOT EXISTS shredduck_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
-- shredduck before 0.1 left the view of its last Arrow insert behind.
DROP VIEW IF EXISTS shredduck_incoming;
-- Where each source of a Loader (the ingest log; source.go) has got to:
-- a row per transaction, written in the transaction that stored the rows
-- before that position; the largest position counts.
-- rows: of the records from position on, how many rows are stored (a
-- transaction ends inside a record at a row group's end); a file of an
-- earlier release gets it at Open (addSourceRows).
CREATE TABLE IF NOT EXISTS shredduck_sources (
    source    VARCHAR NOT NULL,
    position  UBIGINT NOT NULL,
    loaded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    rows      UBIGINT DEFAULT 0
);
