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
    PRIMARY KEY (table_name, level, key)
);
-- shredduck before 0.1 left the view of its last Arrow insert behind.
DROP VIEW IF EXISTS shredduck_incoming;
