package predicatearg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead: the predicate comes from --where, standard input (-) or a
// file, exactly one; blank, missing, doubled, unreadable and oversized
// ones are refused with a message that says which.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "w.txt")
	if err := os.WriteFile(file, []byte("id IN (1, 2)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blankFile := filepath.Join(dir, "blank.txt")
	if err := os.WriteFile(blankFile, []byte(" \n\t"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, where, file, stdin string
		want, err                string
	}{
		{name: "where", where: "id = 3", want: "id = 3"},
		{name: "stdin", where: "-", stdin: "id >= 7", want: "id >= 7"},
		{name: "file", file: file, want: "id IN (1, 2)\n"},
		{name: "both", where: "id = 3", file: file, err: "not both"},
		{name: "none", err: "missing --where (or --where-file)"},
		{name: "blank", where: "   ", err: "--where is blank"},
		{name: "blank stdin", where: "-", stdin: "\n", err: "the predicate read from standard input is blank"},
		{name: "blank file", file: blankFile, err: "the predicate of --where-file " + blankFile + " is blank"},
		{name: "no file", file: filepath.Join(dir, "nope"), err: "--where-file: open"},
		{name: "too long", where: "-", stdin: strings.Repeat("x", MaxBytes+1), err: "longer than 64 MiB"},
	} {
		got, err := Read(c.where, c.file, strings.NewReader(c.stdin))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %q, %v; want an error with %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
