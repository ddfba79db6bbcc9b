//go:build unix

package extsort

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockSpill creates and locks the lock file of a spill directory. flock
// locks belong to the open file, so a lock held by another sorter of this
// process is seen as held too.
func lockSpill(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// held reports whether a live sorter holds the lock file at path. A
// directory without one (written by a streamidx that did not lock) is
// not held.
func held(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true // cannot tell: keep it
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}
