package extsort

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A spill directory is named spillPrefix + a random suffix and holds a lock
// file that its sorter keeps locked until Close. A process killed with
// SIGKILL never closes: the kernel releases its lock and the directory
// stays behind. The first spill of a sorter removes, in the same parent,
// every spill directory whose lock is free and that is older than
// staleAfter (so that one being created, not yet locked, is spared); the
// programs that sort (a build, the daemon) call RemoveStaleSpills when
// they start, so a directory is not left for good when no later sort
// spills.
const (
	spillPrefix   = "streamidx-sort-"
	spillLockName = "LOCK"
	staleAfter    = time.Minute
)

// RemoveStaleSpills removes the spill directories under parent (the OS
// temp dir when empty) that killed sorts left behind: those no live sorter
// holds locked. A nil log discards.
func RemoveStaleSpills(parent string, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	removeStaleSpills(parent, log)
}

// removeStaleSpills removes the spill directories under parent that no
// live sorter holds.
func removeStaleSpills(parent string, log *slog.Logger) {
	if parent == "" {
		parent = os.TempDir()
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), spillPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleAfter {
			continue
		}
		if held(filepath.Join(dir, spillLockName)) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("could not remove a stale spill directory", "dir", dir, "err", err)
			continue
		}
		log.Info("removed the spill directory of a sort that was killed", "dir", dir)
	}
}
