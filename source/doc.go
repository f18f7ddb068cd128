// Package source holds what every way into the database shares: pooled
// batches, decoding one request into a pooled batch under limits
// (Decode), and the rate-limited log of bad input.
package source
