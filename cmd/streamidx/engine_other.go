//go:build !unix

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
)

// pendingStdin is what replaceStdin keeps for the child's standard input.
var pendingStdin io.Reader = os.Stdin

// execProgram runs path as a child with this process's standard streams
// and exits with its status: this platform has no exec.
func execProgram(path string, argv, env []string) error {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, pendingStdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return err
	}
	os.Exit(0)
	return nil
}

func replaceStdin(data []byte) error {
	pendingStdin = bytes.NewReader(data)
	return nil
}
