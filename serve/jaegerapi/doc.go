// Package jaegerapi answers Jaeger's query HTTP API (/api/..., the JSON the
// Jaeger UI and Grafana's Jaeger data source read, and the OTLP-shaped
// /api/v3/...) from the traces table, by SQL run through a query policy.
package jaegerapi
