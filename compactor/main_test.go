package compactor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if they leave goroutines behind: the merge pulls the delta through a coroutine (iter.Pull), and builds scan tables
// with iceberg-go, which reads manifests concurrently.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
