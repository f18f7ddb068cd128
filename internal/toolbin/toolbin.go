// Package toolbin builds the programs of tools/ that tests run (a DuckDB
// 1.5 reader, Jaeger) once into the user's cache directory.
package toolbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build builds pkg of the module tools/<tool> into the user's cache
// directory, as <cache>/shredduck-test/<tool>, and returns its path: one
// path for every test binary, so that test runs leave no copies of large
// binaries behind, and Go's build cache makes a rebuild a link. env is
// added to the build's environment (CGO_ENABLED=...).
func Build(tool, pkg string, env ...string) (string, error) {
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "tools", tool)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "shredduck-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside and renamed into place: test binaries of several
	// packages build at once, and a rename never shows half a file.
	bin := filepath.Join(dir, tool)
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = src
	cmd.Env = append(append(os.Environ(), "GOFLAGS="), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("building tools/%s: %v\n%s", tool, err, out)
	}
	return bin, os.Rename(tmp, bin)
}
