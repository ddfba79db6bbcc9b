package tablescan

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if they leave goroutines behind: scans read manifests through iceberg-go, which does so concurrently.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
