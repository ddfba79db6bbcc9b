package ingest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if they leave goroutines behind: the
// table delta pulls from coroutines (iter.Pull).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
