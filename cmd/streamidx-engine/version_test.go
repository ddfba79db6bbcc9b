package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestVersionNamesTheBuild: streamidx version prints one line with the
// Go version and the versions of the libraries whose files it writes;
// arguments are refused.
func TestVersionNamesTheBuild(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != exitOK {
		t.Fatalf("streamidx version: exit %d: %s", code, errb.String())
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "streamidx ") || !strings.Contains(line, runtime.Version()) {
		t.Errorf("streamidx version printed %q: want one line naming streamidx and %s", line, runtime.Version())
	}
	for _, lib := range []string{"iceberg-go v", "arrow-go v", "franz-go v", "pebble v"} {
		if !strings.Contains(line, lib) {
			t.Errorf("streamidx version printed %q: no %s...", line, lib)
		}
	}
	if code := run([]string{"version", "extra"}, &out, &errb); code != exitError {
		t.Errorf("streamidx version extra: exit %d, want %d", code, exitError)
	}
}
