package main

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/internal/flagcheck"
)

// TestStrayArgumentsAndRepeatedFlagsAreRefused: a word that is not a flag
// would make flag.Parse ignore every flag after it (an expire run for real
// though --dry-run follows, a lookup answering half its predicate), and a
// flag given twice would keep its last value without a word: both are
// refused, and nothing is changed.
func TestStrayArgumentsAndRepeatedFlagsAreRefused(t *testing.T) {
	warehouse, _ := ordersTable(t, 50)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	before := c.ok("inspect", "--table", "test.orders", "--index", "pk")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"expire", "--table", "test.orders", "--index", "pk", "--retain-last", "1", "--grace", "1ms", "now", "--dry-run"}, `unexpected arguments ["now" "--dry-run"]`},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where", "id >= 5", "AND", "id < 7"}, `unexpected arguments ["AND" "id < 7"]`},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 5", "--where", "id = 6"}, "--where given twice"},
		{[]string{"lookup", "--table", "test.orders", "--index", "nope", "--index=pk", "--where", "id = 5"}, "--index given twice"},
		{[]string{"rewrite-deletes", "--table", "test.orders", "please", "--dry-run"}, `unexpected arguments ["please" "--dry-run"]`},
		{[]string{"build", "--table", "test.orders", "--index", "pk", "x"}, `unexpected arguments ["x"]`},
	} {
		code, out, errs := c.run(tc.args...)
		if code != exitError || !strings.Contains(errs, tc.want) {
			t.Errorf("streamidx %s: exit %d, want %d and %q\n%s%s", strings.Join(tc.args, " "), code, exitError, tc.want, out, errs)
		}
	}
	if after := c.ok("inspect", "--table", "test.orders", "--index", "pk"); after != before {
		t.Errorf("a refused command changed the index:\n%s\nbefore:\n%s", after, before)
	}
	// Flags meant to repeat still do, and a bool flag takes no value.
	c.ok("run", "--once", "--table", "test.orders", "--index", "pk", "--table", "test.orders", "--index", "pk", "--stage-dir", t.TempDir())
	c.ok("expire", "--table", "test.orders", "--index", "pk", "--dry-run", "--retain-last", "1")
}

// TestGlobalFlagsMayRepeat: parseFlags lets exactly the global flags
// repeat.
func TestGlobalFlagsMayRepeat(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	(&globals{}).register(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	slices.Sort(names)
	want := slices.Sorted(slices.Values(flagcheck.Global))
	if !slices.Equal(names, want) {
		t.Errorf("global flags %v, parseFlags lets %v repeat", names, want)
	}
}
