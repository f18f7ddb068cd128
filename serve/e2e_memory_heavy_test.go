//go:build e2e && heavy

package serve

import "testing"

// TestMemoryAttacksHeavy runs the mixes at the sizes issue #14 measured
// them at: 32 bombs of 1 MB inflating to 1 GiB each, 16M empty spans in a
// 31 KB body, 16 gRPC bombs of 1 GiB on one connection.
func TestMemoryAttacksHeavy(t *testing.T) {
	runMemoryAttacks(t, memoryScale{
		bombs: 32, bombMiB: 1024,
		liars:      40,
		emptySpans: 16 << 20, emptyBodies: 1,
		grpcBombs: 16, grpcBombMiB: 1024,
		keys: 50_000, spreadKeys: 50_000,
	})
}
