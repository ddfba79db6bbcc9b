package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchFreshnessFigures runs one freshness scenario of `streamidx bench`
// on a small table: it prints one table and writes every figure of both
// indexes as JSON, and the index snapshots the stream produced verify.
func TestBenchFreshnessFigures(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "streamidx.yaml")
	if err := os.WriteFile(cfg, []byte("build:\n  target-file-size: 16KiB\n  row-group-rows: 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "figures.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--config", cfg, "--rows", "3000", "--duration", "2s", "--interval", "500ms", "--drain", "30s",
		"--verify", "all", "--only", "freshness.tail-1000.latest", "--dir", filepath.Join(dir, "bench"), "--json", out}, &stdout, &stderr)
	// Exit 1 means a goal was missed, which a loaded machine may cause.
	if code != exitOK && code != exitDifferent {
		t.Fatalf("bench: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var figures []map[string]any
	if err := json.Unmarshal(data, &figures); err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]any{}
	for _, f := range figures {
		for _, key := range []string{"name", "value", "unit", "baseline", "baseline_value", "ratio", "goal", "met"} {
			if _, ok := f[key]; !ok {
				t.Fatalf("figure %v has no %q", f, key)
			}
		}
		name := f["name"].(string)
		if !strings.HasPrefix(name, "freshness.tail-1000.latest.") {
			t.Errorf("figure %s is outside --only", name)
		}
		byName[name] = f
	}
	if got := byName["freshness.tail-1000.latest.commits"]; got == nil || got["value"].(float64) != 4 {
		t.Errorf("commits: %v, want 4 (2s at one commit per 500ms)", got)
	}
	for _, index := range []string{"pk", "by_customer"} {
		p := "freshness.tail-1000.latest." + index + "."
		for _, fig := range []string{"lag_p50", "lag_p99", "lag_max", "lag_growth", "uncovered", "index_snapshots", "entries_rewritten", "bytes_written"} {
			if byName[p+fig] == nil {
				t.Errorf("no figure %s", p+fig)
			}
		}
		if n := byName[p+"index_snapshots"]; n == nil || n["value"].(float64) < 1 {
			t.Errorf("%s published no index snapshot: %v", index, n)
		}
		if u := byName[p+"uncovered"]; u == nil || u["value"].(float64) != 0 {
			t.Errorf("%s left commits uncovered after the drain: %v", index, u)
		}
		exact := byName[p+"exact"]
		if exact == nil || exact["met"] != true || exact["value"] != byName[p+"index_snapshots"]["value"] {
			t.Errorf("%s: every index snapshot the stream produced must verify: %v", index, exact)
		}
	}
	if !strings.Contains(stdout.String(), "freshness.tail-1000.latest.pk.lag_p99") {
		t.Errorf("the table lacks the figures:\n%s", stdout.String())
	}
}
