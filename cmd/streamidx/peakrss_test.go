package main

import (
	"context"
	"runtime"
	"testing"
)

// A child's peak RSS in the bench's figures is its own: a parent that holds
// far more memory than the child ever uses does not show in it (wait4's
// ru_maxrss would report at least the parent's).
func TestChildPeakRSSIsTheChildsOwn(t *testing.T) {
	t.Setenv("STREAMIDX_TEST_AS_COMMAND", "1") // the test binary acts as streamidx
	const held = 512 << 20
	ballast := make([]byte, held)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1 // resident, not just reserved
	}
	b := &bench{g: &globals{}}
	r, err := b.child(context.Background(), t.TempDir(), "gen-table", "--table", "bench.orders", "--rows", "1000")
	runtime.KeepAlive(ballast)
	if err != nil {
		t.Fatal(err)
	}
	if r.maxRSS <= 0 || r.maxRSS >= held/2 {
		t.Fatalf("peak RSS of streamidx gen-table reported as %d MiB with the parent holding %d MiB: want the child's own, above 0 and well under the parent's", r.maxRSS>>20, held>>20)
	}
	t.Logf("streamidx gen-table: peak RSS %d MiB", r.maxRSS>>20)
}
