package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// engineName is the program that runs every command this one does not.
const engineName = "streamidx-engine"

// engineEnv, when set, is the path of streamidx-engine.
const engineEnv = "STREAMIDX_ENGINE"

// enginePath finds streamidx-engine: $STREAMIDX_ENGINE, else beside this
// program (as `make build`, `go install .../cmd/...` and the container
// image install the two), else on $PATH.
func enginePath() (string, error) {
	if p := os.Getenv(engineEnv); p != "" {
		return p, nil
	}
	var dirs []string
	if self, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(self))
		if real, err := filepath.EvalSymlinks(self); err == nil && filepath.Dir(real) != filepath.Dir(self) {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, engineName)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(engineName); err == nil {
		return p, nil
	}
	where := "beside this program"
	if len(dirs) > 0 {
		where = "in " + dirs[0]
	}
	return "", fmt.Errorf("%s runs every command but a lookup of a current index, and it is neither %s nor on $PATH (nor named by $%s): "+
		"install both programs (make build; or go install github.com/streamidx/streamidx/cmd/...@latest)", engineName, where, engineEnv)
}

// runEngine turns this process into streamidx-engine with args. stdin,
// when not nil, is what this process already read of its standard input
// (a predicate given as --where -), which the engine then reads instead.
// It returns only when that fails.
func runEngine(args []string, stdin []byte) error {
	path, err := enginePath()
	if err != nil {
		return err
	}
	if self, err := os.Executable(); err == nil && sameFile(self, path) {
		return fmt.Errorf("%s is this program, not %s: it would run itself for ever", path, engineName)
	}
	if stdin != nil {
		if err := replaceStdin(stdin); err != nil {
			return fmt.Errorf("hand the predicate read from standard input to %s: %w", engineName, err)
		}
	}
	if err := execProgram(path, append([]string{"streamidx"}, args...), os.Environ()); err != nil {
		return fmt.Errorf("run %s: %w", path, err)
	}
	return nil
}

// sameFile reports whether paths a and b name one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
