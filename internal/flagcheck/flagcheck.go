// Package flagcheck refuses what the standard flag package lets through on
// a parsed command line: words that are not flags, and a single-valued flag
// given twice. Both programs (streamidx and streamidx-engine) use it, so a
// command line means the same to either.
package flagcheck

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

// Check inspects args after fs parsed them. flag.Parse stops at the first
// word that is not a flag and ignores every flag after it (`expire ... now
// --dry-run` would expire), and keeps the last value of a flag given twice
// without a word. Flags meant to repeat have values of their own type (not
// the flag package's) and may be given again, as may the flags named in
// mayRepeat (settings whose last value wins by design, such as a global
// --config that a later one overrides).
func Check(fs *flag.FlagSet, args []string, mayRepeat ...string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every argument is a flag (quote a value that holds spaces, such as --where \"a = 1 AND b = 2\")", fs.Args())
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			continue // flag.Parse has refused it already
		}
		single := strings.HasPrefix(fmt.Sprintf("%T", f.Value), "*flag.")
		if single && seen[name] && !slices.Contains(mayRepeat, name) {
			return fmt.Errorf("--%s given twice: it takes one value", name)
		}
		seen[name] = true
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) {
			i++ // the next argument is this flag's value
		}
	}
	return nil
}

// Global are the global flags both programs accept before and after the
// command; a later one overrides an earlier one, so they may repeat.
var Global = []string{"config", "catalog-uri", "catalog-name", "warehouse", "log-level"}
