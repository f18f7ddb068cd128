// Package jsonscan provides a fast, allocation-free, pull-style JSON iterator over a byte slice.
package jsonscan
