package flagcheck

import (
	"flag"
	"strings"
	"testing"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" when accepted
	}{
		{[]string{"--where", "a = 1", "--json"}, ""},
		{[]string{"--where=a = 1", "--dry-run", "--dry-run=false"}, "--dry-run given twice"},
		{[]string{"--where", "a = 1", "AND", "b = 2"}, `unexpected arguments ["AND" "b = 2"]`},
		{[]string{"--where", "a = 1", "--where", "b = 2"}, "--where given twice"},
		{[]string{"-where", "a", "--where=b"}, "--where given twice"},
		{[]string{"--topic", "x", "--topic", "y", "--config", "a", "--config", "b"}, ""},
		{[]string{"--where", "--json"}, ""}, // "--json" is the value of --where
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("where", "", "")
		fs.String("config", "", "")
		fs.Bool("json", false, "")
		fs.Bool("dry-run", false, "")
		var topics list
		fs.Var(&topics, "topic", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		err := Check(fs, tc.args, "config")
		if err != nil {
			if tc.want == "" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%q: accepted, want %q", tc.args, tc.want)
		}
	}
}
