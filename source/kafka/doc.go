// Package kafka consumes OTLP export requests from Kafka topics as a
// member of a consumer group and stores them, each partition's offset in
// the same transaction as its rows, through an ingest.Loader.
package kafka
