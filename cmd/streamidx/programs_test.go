package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// programs builds streamidx and streamidx-engine into one directory, as
// `make build` installs them.
func programs(t *testing.T) (front, engine string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	for _, p := range []string{"streamidx", "streamidx-engine"} {
		if out, err := exec.Command(goTool, "build", "-o", filepath.Join(dir, p), "github.com/streamidx/streamidx/cmd/"+p).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", p, err, out)
		}
	}
	return filepath.Join(dir, "streamidx"), filepath.Join(dir, "streamidx-engine")
}

type ran struct {
	stdout, stderr string
	code           int
}

// runProgram runs exe with args, stdin and extra environment.
func runProgram(t *testing.T, exe, stdin string, env []string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return ran{o.String(), e.String(), cmd.ProcessState.ExitCode()}
}

// TestFastLookupPrintsAsTheEngine runs lookups through streamidx and
// through streamidx-engine on the same index and compares what they print
// byte for byte. While the index is current, streamidx answers with no
// engine at hand (it is not run: $STREAMIDX_ENGINE names nothing); once
// the table moved past the index, the lookup needs the engine's
// reconciliation, and streamidx hands it over.
func TestFastLookupPrintsAsTheEngine(t *testing.T) {
	front, engine := programs(t)
	dir := t.TempDir()
	base := []string{"--catalog-uri", "sqlite://" + filepath.Join(dir, "catalog.db"), "--warehouse", "file://" + filepath.Join(dir, "warehouse"), "--log-level", "warn"}
	setup := func(args ...string) {
		t.Helper()
		if r := runProgram(t, engine, "", nil, append(args, base...)...); r.code != 0 {
			t.Fatalf("streamidx-engine %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	def := filepath.Join(dir, "pk.yaml")
	if err := os.WriteFile(def, []byte("name: pk\nidentity: [order_id]\nmaterialized: [_file, _pos]\ncluster: [order_id]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setup("gen-table", "--table", "shop.orders", "--rows", "30000", "--commits", "3")
	setup("create", "--table", "shop.orders", "--def", def)
	setup("build", "--table", "shop.orders", "--index", "pk")
	built := runProgram(t, engine, "", nil, append([]string{"inspect", "--table", "shop.orders", "--index", "pk", "--json"}, base...)...)
	var ins struct {
		Snapshots []struct {
			TableSnapshotID int64 `json:"source_table_snapshot_id"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(built.stdout), &ins); err != nil || len(ins.Snapshots) != 1 || ins.Snapshots[0].TableSnapshotID == 0 {
		t.Fatalf("inspect --json: %v\n%s", err, built.stdout)
	}
	indexed := ins.Snapshots[0].TableSnapshotID

	type query struct {
		stdin string
		args  []string
	}
	queries := []query{
		{"", []string{"--where", "order_id = 4242", "--json"}},
		{"", []string{"--where", "order_id IN (7, 29999, 123456)", "--json", "--explain"}},
		{"", []string{"--where", "order_id >= 100 AND order_id < 140"}},
		{"", []string{"--where", "order_id >= 100 AND order_id < 140", "--explain"}},
		{"", []string{"--where", "order_id > 10", "--limit", "3", "--json"}},
		{"order_id IN (1, 2, 3)", []string{"--where", "-", "--json"}},
		{"", []string{"--where", "order_id = 9", "--json", "--snapshot", jsonInt(indexed)}},
	}
	noEngine := []string{engineEnv + "=" + filepath.Join(dir, "no-engine-here")}
	check := func(q query, current bool) {
		t.Helper()
		args := append(append([]string{"--table", "shop.orders", "--index", "pk"}, q.args...), base...)
		want := runProgram(t, engine, q.stdin, nil, append([]string{"lookup"}, args...)...)
		if want.code != 0 || want.stdout == "" {
			t.Fatalf("streamidx-engine lookup %v: exit %d\n%s", q.args, want.code, want.stderr)
		}
		// Global flags may come first, as the engine takes them.
		got := runProgram(t, front, q.stdin, nil, append(append(append([]string{}, base...), "lookup"), args[:len(args)-len(base)]...)...)
		if got != want {
			t.Errorf("lookup %v: streamidx printed\n%s(exit %d, stderr %q)\nstreamidx-engine printed\n%s", q.args, got.stdout, got.code, got.stderr, want.stdout)
		}
		alone := runProgram(t, front, q.stdin, noEngine, append([]string{"lookup"}, args...)...)
		answered := q.args[len(q.args)-2] == "--snapshot" || current
		switch {
		case answered && alone != want:
			t.Errorf("lookup %v without an engine: exit %d, stderr %q; want it answered as the engine does", q.args, alone.code, alone.stderr)
		case !answered && (alone.code != 2 || !strings.Contains(alone.stderr, "no-engine-here")):
			t.Errorf("lookup %v of a lagging index without an engine: exit %d, stderr %q; want the engine run (and missing)", q.args, alone.code, alone.stderr)
		}
	}
	for _, q := range queries {
		check(q, true)
	}
	// The table moves on; the index stays where it was.
	setup("gen-table", "--table", "shop.orders", "--rows", "30000", "--upsert", "40", "--pattern", "tail")
	for _, q := range queries {
		check(q, false)
	}
	lagging := runProgram(t, front, "", nil, append([]string{"lookup", "--table", "shop.orders", "--index", "pk", "--where", "order_id >= 29990", "--explain"}, base...)...)
	if lagging.code != 0 || !strings.Contains(lagging.stdout, "1 commits behind") {
		t.Errorf("lookup of a lagging index: exit %d, printed\n%s%s", lagging.code, lagging.stdout, lagging.stderr)
	}
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEngineNotFound: a command streamidx does not answer itself fails
// with a message saying where the engine was looked for, and an engine
// that is streamidx itself is refused rather than run for ever.
func TestEngineNotFound(t *testing.T) {
	front, _ := programs(t)
	alone := filepath.Join(t.TempDir(), "streamidx")
	data, err := os.ReadFile(front)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + t.TempDir()}
	if r := runProgram(t, alone, "", env, "version"); r.code != 2 || !strings.Contains(r.stderr, "streamidx-engine") || !strings.Contains(r.stderr, filepath.Dir(alone)) {
		t.Errorf("version without an engine: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runProgram(t, front, "", []string{engineEnv + "=" + front}, "version"); r.code != 2 || !strings.Contains(r.stderr, "is this program") {
		t.Errorf("an engine that is streamidx itself: exit %d, stderr %q", r.code, r.stderr)
	}
}
