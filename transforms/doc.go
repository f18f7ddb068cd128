// Package transforms turns decoded telemetry (OTLP export requests) into
// rows of shredduck batches: which columns a record has and what goes in them.
package transforms
