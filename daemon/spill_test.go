package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartRemovesStaleSpills: the daemon's start removes the spill
// directory of a full build that was killed with it, in build.spill-dir.
func TestStartRemovesStaleSpills(t *testing.T) {
	h := newHarness(t, 0, "pk")
	h.cfg.Build.SpillDir = t.TempDir()
	dead := filepath.Join(h.cfg.Build.SpillDir, "streamidx-sort-killed")
	if err := os.MkdirAll(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dead, old, old); err != nil {
		t.Fatal(err)
	}
	d, err := New(h.cat, h.indexes, nil, h.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the killed build's spill directory is still there after the daemon started: %v", err)
	}
}
