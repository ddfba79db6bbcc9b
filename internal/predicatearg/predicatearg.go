// Package predicatearg reads the predicate of a lookup from the command
// line the way `streamidx lookup` and `streamidx-client lookup` both take
// it: --where EXPR, --where - (standard input) or --where-file FILE. It
// imports only the standard library.
package predicatearg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxBytes bounds a predicate read from a file or standard input, so that
// a wrong file (a data file, /dev/zero) fails at once.
const MaxBytes = 64 << 20

// Read returns the predicate given by where (- for stdin) or file, exactly
// one of them. A blank predicate is refused: a planner would read it as
// "every entry", which is never what someone typing --where meant.
func Read(where, file string, stdin io.Reader) (string, error) {
	var src io.Reader
	what := "--where"
	switch {
	case where != "" && file != "":
		return "", errors.New("give the predicate with --where or with --where-file, not both")
	case where == "" && file == "":
		return "", errors.New("missing --where (or --where-file)")
	case where == "-":
		src, what = stdin, "the predicate read from standard input"
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--where-file: %w", err)
		}
		defer f.Close()
		src, what = f, "the predicate of --where-file "+file
	}
	if src != nil {
		data, err := io.ReadAll(io.LimitReader(src, MaxBytes+1))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", what, err)
		}
		if len(data) > MaxBytes {
			return "", fmt.Errorf("%s is longer than %d MiB", what, MaxBytes>>20)
		}
		where = string(data)
	}
	if strings.TrimSpace(where) == "" {
		return "", fmt.Errorf("%s is blank: give a condition, such as \"id = 42\"", what)
	}
	return where, nil
}
