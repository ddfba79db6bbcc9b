package planner

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if they leave goroutines behind: lookups scan data files added since the index snapshot, and iceberg-go
// reads manifests concurrently.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
