//go:build !linux

package sqlpolicy

// lowerPriority is a no-op where threads have no priority of their own.
func lowerPriority() {}
