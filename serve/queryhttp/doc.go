// Package queryhttp is the HTTP query endpoint, POST /v1/query: one
// read-only SELECT run under the policy of serve/sqlpolicy, its result
// rendered as JSON or CSV.
package queryhttp
