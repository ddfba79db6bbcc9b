package flush

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if they leave goroutines behind: publishing and expiry run against SQL catalogs whose connection
// pools run goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
