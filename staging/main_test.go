package staging

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		err := crashChild(dir)
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}
