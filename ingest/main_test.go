package ingest

import (
	"os"
	"testing"
)

// TestMain gives every key a stored column at first sight (see
// defaultDensity); the density rule's tests set DB.ColumnDensity.
func TestMain(m *testing.M) {
	defaultDensity = 0
	os.Exit(m.Run())
}
