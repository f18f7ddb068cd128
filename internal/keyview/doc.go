// Package keyview makes every attribute key read as the column "key" of
// its table for one query, through temporary views that hold only the keys
// the query names.
package keyview
