//go:build !(linux && cgo)

package main

func tuneAllocator(func(string) (string, bool), bool) bool { return false }

func allocatorDecay() (int64, bool) { return 0, false }

func purgeRefused() bool { return false }
