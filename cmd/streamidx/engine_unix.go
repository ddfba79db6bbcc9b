//go:build unix

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// execProgram replaces this process with path: the same process ID, so a
// supervisor's signals and the exit status go to the engine itself.
func execProgram(path string, argv, env []string) error {
	return syscall.Exec(path, argv, env)
}

// replaceStdin makes data this process's standard input: an unlinked
// temporary file holding it becomes file descriptor 0, which exec keeps.
func replaceStdin(data []byte) error {
	f, err := os.CreateTemp("", "streamidx-where-*")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	return unix.Dup2(int(f.Fd()), 0)
}
