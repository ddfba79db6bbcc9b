package extsort

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStaleSpillDirectoriesAreRemoved: a build killed with SIGKILL leaves
// its spill directory; the next sorter that spills in the same place
// removes it. The spill directory of a sorter still at work, and one just
// being created, are left alone.
func TestStaleSpillDirectoriesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	// A sorter at work: its directory is locked by this process.
	live := spilledSorter(t, dir)
	if !live.Spilled() {
		t.Fatal("the live sorter did not spill")
	}
	// What a killed process leaves: the kernel released its lock.
	old := time.Now().Add(-time.Hour)
	dead := filepath.Join(dir, "streamidx-sort-12345")
	legacy := filepath.Join(dir, "streamidx-sort-67890") // written before spill directories had a lock file
	fresh := filepath.Join(dir, "streamidx-sort-00001")  // another process has just created it
	other := filepath.Join(dir, "unrelated")
	for _, d := range []string{dead, legacy, fresh, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "run-000000"), []byte("spilled"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dead, spillLockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dead, legacy, other, live.tmp} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	next := spilledSorter(t, dir)
	for d, kept := range map[string]bool{dead: false, legacy: false, fresh: true, other: true, live.tmp: true, next.tmp: true} {
		_, err := os.Stat(d)
		if exists := err == nil; exists != kept {
			t.Errorf("%s: exists %t, want %t", filepath.Base(d), exists, kept)
		}
	}
	var got [][]byte
	if err := live.Iterate(func(k, _ []byte) error { got = append(got, append([]byte(nil), k...)); return nil }); err != nil || len(got) != 3 {
		t.Errorf("the live sorter lost its runs: %v (%d records)", err, len(got))
	}
}

// TestRemoveStaleSpillsAtStart: a program that starts (a build, the
// daemon) removes what a killed sort left, before any sort of its own
// spills, and leaves a live sorter's directory and other files alone.
func TestRemoveStaleSpillsAtStart(t *testing.T) {
	dir := t.TempDir()
	live := spilledSorter(t, dir)
	dead := filepath.Join(dir, "streamidx-sort-4242")
	other := filepath.Join(dir, "streamidx-notes")
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{dead, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, spillLockName), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{dead, other, live.tmp} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	RemoveStaleSpills(dir, nil)
	for d, kept := range map[string]bool{dead: false, other: true, live.tmp: true} {
		if _, err := os.Stat(d); (err == nil) != kept {
			t.Errorf("%s: exists %t, want %t", filepath.Base(d), err == nil, kept)
		}
	}
}

// spilledSorter is a sorter in dir that has spilled three records (a
// memory limit of one byte), closed at the end of the test.
func spilledSorter(t *testing.T, dir string) *Sorter {
	t.Helper()
	s := NewSorter(dir, 1, nil)
	t.Cleanup(func() { s.Close() })
	for i := range 3 {
		if err := s.Add([]byte{byte(i)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
