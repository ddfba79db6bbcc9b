package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/streamidx/streamidx/client"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/internal/testtls"
	"github.com/streamidx/streamidx/planner"
)

// startServe runs `streamidx serve` in this process until the test ends
// and returns its base URL.
func startServe(t *testing.T, c *cli, args ...string) string {
	t.Helper()
	return startServeAt(t, c, "http", noKeepAlive, args...)
}

// startServeAt runs `streamidx serve` as startServe does, for a service
// that speaks scheme (http or https), which probe can reach.
func startServeAt(t *testing.T, c *cli, scheme string, probe *http.Client, args ...string) string {
	t.Helper()
	addr := testAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	fs := flag.NewFlagSet("streamidx serve", flag.ContinueOnError)
	var stderr bytes.Buffer
	g := &globals{stderr: &stderr}
	g.register(fs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := runServe(ctx, g, fs, append(append(append([]string{}, c.base...), "--http", addr), args...), io.Discard); err != nil {
			t.Errorf("serve: %v\n%s", err, stderr.String())
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	base := scheme + "://" + addr
	waitOK(t, "streamidx serve answers", probe, base+"/healthz")
	return base
}

// newClient returns a client of the service at base whose connections
// are closed when the test ends, before the service stops.
func newClient(t *testing.T, base, token string) *client.Client {
	c := client.New(base, client.Options{Token: token})
	t.Cleanup(c.Close)
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting until %s", what)
}

// waitOK waits until a GET of url through probe answers 200.
func waitOK(t *testing.T, what string, probe *http.Client, url string) {
	t.Helper()
	waitFor(t, what, func() bool {
		resp, err := probe.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// createIndex creates one of the test definitions.
func createIndex(t *testing.T, c *cli, name string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(path, []byte(definitions[name]), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("create", "--table", "test.orders", "--def", path)
}

// cliRows runs `streamidx lookup --json` and returns its row lines.
func cliRows(t *testing.T, c *cli, index, where string, snapshot int64) []string {
	t.Helper()
	out := c.ok("lookup", "--table", "test.orders", "--index", index, "--where", where, "--json", "--snapshot", strconv.FormatInt(snapshot, 10))
	var rows []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		rows = append(rows, sc.Text())
	}
	return rows
}

func rawRows(rows []json.RawMessage) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r)
	}
	return out
}

// arrowRows counts the rows of the Arrow IPC stream in file.
func arrowRows(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd, err := ipc.NewReader(f)
	if err != nil {
		return 0, err
	}
	defer rd.Release()
	var n int64
	for rd.Next() {
		n += rd.RecordBatch().NumRows()
	}
	return n, rd.Err()
}

// buildCommand builds cmd/<name> (streamidx-client, or the streamidx that
// answers lookups of current indexes itself) into a directory of the
// test and returns its path.
func buildCommand(t *testing.T, name string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	exe := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command(goTool, "build", "-o", exe, "github.com/streamidx/streamidx/cmd/"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return exe
}

// runClientCommand runs streamidx-client with args and returns what it
// printed and its exit status.
func runClientCommand(t *testing.T, exe string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "STREAMIDX_SERVE_TOKEN=")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("start streamidx-client: %v", err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestServeAnswersAsLookupJSON: point, IN and range lookups through the
// service give exactly the rows of `streamidx lookup --json` on the same
// index, for the index's own table snapshot, for a newer table snapshot
// the index lags behind (reconciled), and for an older one by id; the
// header names the snapshots used; the Arrow answer has the same rows; the
// index list and description are those of list and inspect --json; a
// streamidx-client process prints what lookup --json prints.
func TestServeAnswersAsLookupJSON(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, files := testtables.Append(t, tbl, testtables.OrderRows(0, 120, 0)...)
	first := tbl.CurrentSnapshot().SnapshotID
	c := newCLI(t, warehouse, "")
	for _, name := range []string{"pk", "by_customer"} {
		createIndex(t, c, name)
		c.ok("build", "--table", "test.orders", "--index", name)
	}
	// The index lags two commits behind: a delete and an append.
	tbl, _ = testtables.AddPositionDeletes(t, tbl, testtables.Positions{File: files[0], Pos: []int64{3, 42, 77}})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(120, 160, 1)...)
	current := tbl.CurrentSnapshot().SnapshotID
	base := startServe(t, c)
	cl := newClient(t, base, "")
	ctx := context.Background()
	clientExe := buildCommand(t, "streamidx-client")

	queries := []struct{ index, where string }{
		{"pk", "id = 42"},
		{"pk", "id = 77777"},
		{"pk", "id IN (1, 3, 5, 77, 130, 159)"},
		{"pk", "id >= 30 AND id < 140"},
		{"by_customer", "customer_id = 3"},
		{"by_customer", "customer_id IN (2, 5) AND id > 100"},
	}
	// A long IN list: a predicate of 1.4 KB.
	var keys []string
	for k := 0; k < 600; k += 2 {
		keys = append(keys, strconv.Itoa(k))
	}
	queries = append(queries, struct{ index, where string }{"pk", "id IN (" + strings.Join(keys, ", ") + ")"})
	for _, snap := range []int64{0, first} {
		for _, q := range queries {
			ans, err := cl.Lookup(ctx, "test.orders", q.index, client.Request{Where: q.where, Snapshot: snap})
			if err != nil {
				t.Fatalf("%s %q at %d: %v", q.index, q.where, snap, err)
			}
			want := cliRows(t, c, q.index, q.where, snap)
			if got := rawRows(ans.Rows); !slices.Equal(got, want) {
				t.Errorf("%s %q at snapshot %d: service answered\n%s\nstreamidx lookup --json printed\n%s",
					q.index, q.where, snap, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// streamidx-client prints what lookup --json printed.
			if out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", base, "--table", "test.orders", "--index", q.index,
				"--where", q.where, "--snapshot", strconv.FormatInt(snap, 10)); code != 0 || out != strings.Join(append(want, ""), "\n") {
				t.Errorf("%s %q at snapshot %d: streamidx-client exited %d and printed\n%s\n(stderr %s), streamidx lookup --json printed\n%s",
					q.index, q.where, snap, code, out, stderr, strings.Join(want, "\n"))
			}
			wantTable, wantBehind := current, 2
			if snap == first {
				wantTable, wantBehind = first, 0
			}
			h := ans.Header
			if h.TableSnapshotID != wantTable || h.SourceSnapshotID != first || h.CommitsBehind != wantBehind || h.IndexSnapshotID == 0 || h.Rows != int64(len(want)) {
				t.Errorf("%s %q at %d: header %+v, want table snapshot %d from source %d, %d behind, %d rows", q.index, q.where, snap, h, wantTable, first, wantBehind, len(want))
			}
			arrowAns, err := cl.LookupArrow(ctx, "test.orders", q.index, client.Request{Where: q.where, Snapshot: snap})
			if err != nil {
				t.Fatal(err)
			}
			if arrowAns.NumRows() != int64(len(want)) || arrowAns.IndexSnapshotID != h.IndexSnapshotID || arrowAns.TableSnapshotID != h.TableSnapshotID {
				t.Errorf("%s %q: arrow answer has %d rows from index snapshot %d for %d, want %d from %d for %d",
					q.index, q.where, arrowAns.NumRows(), arrowAns.IndexSnapshotID, arrowAns.TableSnapshotID, len(want), h.IndexSnapshotID, h.TableSnapshotID)
			}
			arrowAns.Release()
		}
	}
	// Explain: the plan line of lookup --json --explain, with the same plan.
	ans, err := cl.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 42", Explain: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	var x planner.ExplainLine
	if err := json.Unmarshal(ans.Explain, &x); err != nil || x.Explain.Plan.IndexSnapshotID != ans.Header.IndexSnapshotID || x.Explain.Plan.Predicate == "" {
		t.Errorf("explain line %s (%v) does not describe the plan", ans.Explain, err)
	}

	// streamidx-client --arrow: the same rows as an Arrow IPC stream in a
	// file, the snapshots on stderr.
	rangeQ := queries[3]
	wantRange := cliRows(t, c, rangeQ.index, rangeQ.where, 0)
	arrowFile := filepath.Join(t.TempDir(), "rows.arrows")
	if out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", base, "--table", "test.orders", "--index", rangeQ.index,
		"--where", rangeQ.where, "--arrow", arrowFile, "--header"); code != 0 || out != "" ||
		!strings.Contains(stderr, fmt.Sprintf("exact for table snapshot %d", current)) {
		t.Errorf("streamidx-client --arrow exited %d, printed %q, stderr %q", code, out, stderr)
	}
	if n, err := arrowRows(arrowFile); err != nil || n != int64(len(wantRange)) {
		t.Errorf("streamidx-client --arrow wrote %d rows (%v), want the %d of lookup --json", n, err, len(wantRange))
	}

	// streamidx-client reads a long predicate from a file or its
	// standard input, as lookup does.
	long := queries[len(queries)-1]
	wantLong := strings.Join(append(cliRows(t, c, long.index, long.where, 0), ""), "\n")
	whereFile := filepath.Join(t.TempDir(), "where.txt")
	if err := os.WriteFile(whereFile, []byte(long.where), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", base, "--table", "test.orders", "--index", "pk",
		"--where-file", whereFile); code != 0 || out != wantLong {
		t.Errorf("streamidx-client --where-file exited %d and printed\n%s\n(stderr %s), want\n%s", code, out, stderr, wantLong)
	}

	// streamidx-client: the header line names the snapshots; the plan
	// line comes last; a predicate that does not parse and an unknown
	// index are errors that say so.
	out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", base, "--table", "test.orders", "--index", "pk", "--where", "id = 43",
		"--header", "--explain")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var hl struct{ Streamidx client.Header }
	if code != 0 || len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &hl) != nil || hl.Streamidx.TableSnapshotID != current ||
		hl.Streamidx.SourceSnapshotID != first || !strings.HasPrefix(lines[2], `{"explain":`) {
		t.Errorf("streamidx-client lookup --header --explain exited %d and printed\n%s\n(stderr %s); want a header for table snapshot %d from %d, a row, the plan",
			code, out, stderr, current, first)
	}
	for _, bad := range []struct{ index, where, says string }{{"pk", "id = = 3", "bad_predicate"}, {"nope", "id = 3", "no_such_index"}} {
		out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", base, "--table", "test.orders", "--index", bad.index, "--where", bad.where)
		if code != 2 || out != "" || !strings.Contains(stderr, bad.says) {
			t.Errorf("streamidx-client lookup --index %s --where %q exited %d, printed %q, stderr %q; want 2, nothing, an error that says %s",
				bad.index, bad.where, code, out, stderr, bad.says)
		}
	}
	if out, stderr, code := runClientCommand(t, clientExe, "inspect", "--server", base, "--table", "test.orders", "--index", "pk"); code != 0 ||
		!strings.Contains(out, `"index": "pk"`) || !strings.Contains(out, `"range_files"`) {
		t.Errorf("streamidx-client inspect exited %d and printed %s (stderr %s)", code, out, stderr)
	}

	if out, stderr, code := runClientCommand(t, clientExe, "lookup", "--server", "http://"+testAddr(t), "--table", "test.orders", "--index", "pk",
		"--where", "id = 3"); code != 2 || out != "" || !strings.Contains(stderr, "nothing listens at") {
		t.Errorf("streamidx-client lookup of a service that is not there exited %d, printed %q, stderr %q; want 2, nothing, nothing listens at ...",
			code, out, stderr)
	}
	if out, stderr, code := runClientCommand(t, clientExe, "version"); code != 0 || !strings.HasPrefix(out, "streamidx-client ") {
		t.Errorf("streamidx-client version exited %d and printed %q (stderr %s)", code, out, stderr)
	}

	entries, err := cl.Indexes(ctx, "test.orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Index != "by_customer" || entries[1].Index != "pk" || entries[1].SourceSnapshotID == nil || *entries[1].SourceSnapshotID != first {
		t.Errorf("index list %+v, want by_customer and pk built for %d", entries, first)
	}
	got, err := cl.Inspect(ctx, "test.orders", "pk", 0)
	if err != nil {
		t.Fatal(err)
	}
	var want inspectOutput
	if err := json.Unmarshal([]byte(c.ok("inspect", "--table", "test.orders", "--index", "pk", "--json")), &want); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("GET .../indexes/pk:\n%s\ninspect --json:\n%s", gotJSON, wantJSON)
	}
}

// TestServeRefusesWhatItShould: with a token configured (here through
// STREAMIDX_SERVE_TOKEN) a request without it, or with another, is a 401;
// a predicate that does not parse is a 400 with the parser's message; a
// predicate over serve.max-predicate-bytes a 413; an answer over
// serve.max-rows a 422 unless the request's limit is within it; an unknown
// table, index or snapshot a 404; a request past serve.timeout a 408.
func TestServeRefusesWhatItShould(t *testing.T) {
	warehouse, _ := ordersTable(t, 50)
	c := newCLI(t, warehouse, "serve:\n  max-rows: 10\n  max-predicate-bytes: 100\n")
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	t.Setenv("STREAMIDX_SERVE_TOKEN", "s3cret")
	base := startServe(t, c)
	ctx := context.Background()
	good := newClient(t, base, "s3cret")

	for _, token := range []string{"", "wrong"} {
		_, err := newClient(t, base, token).Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1"})
		if !client.IsStatus(err, http.StatusUnauthorized) {
			t.Errorf("token %q: %v, want 401", token, err)
		}
	}
	if _, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1"}); err != nil {
		t.Fatalf("with the token: %v", err)
	}

	_, perr := planner.Parse("id = = 3")
	_, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = = 3"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Message != perr.Error() {
		t.Errorf("bad predicate: %v, want 400 with %q", err, perr)
	}
	_, err = good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "nosuch = 3"})
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Message, "unknown column nosuch") {
		t.Errorf("unknown column: %v, want 400 naming it", err)
	}
	long := "id IN (" + strings.Repeat("1, ", 40) + "2)"
	if _, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: long}); !client.IsStatus(err, http.StatusRequestEntityTooLarge) {
		t.Errorf("long predicate: %v, want 413", err)
	}
	if _, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id < 20"}); !client.IsStatus(err, http.StatusUnprocessableEntity) {
		t.Errorf("20 rows over a limit of 10: %v, want 422", err)
	}
	ans, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id < 20", Limit: 4})
	if err != nil || len(ans.Rows) != 4 || !ans.Header.Truncated {
		t.Errorf("limit 4: %v, %+v, want 4 rows, truncated", err, ans)
	}
	if ans, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id < 10"}); err != nil || len(ans.Rows) != 10 || ans.Header.Truncated {
		t.Errorf("10 rows at a limit of 10: %v, %+v", err, ans)
	}
	for _, q := range []struct{ table, index string }{{"test.nosuch", "pk"}, {"test.orders", "nosuch"}, {"nons.orders", "pk"}} {
		if _, err := good.Lookup(ctx, q.table, q.index, client.Request{Where: "id = 1"}); !client.IsStatus(err, http.StatusNotFound) {
			t.Errorf("%s/%s: %v, want 404", q.table, q.index, err)
		}
	}
	if _, err := good.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1", Snapshot: 12345}); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("unknown snapshot: %v, want 404", err)
	}
	if _, err := good.Indexes(ctx, "test.nosuch"); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("indexes of an unknown table: %v, want 404", err)
	}
	// GET takes the same parameters.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/tables/test.orders/indexes/pk/lookup?where=id+%3D+7&explain=true", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := noKeepAlive.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if lines := strings.Split(strings.TrimSpace(string(body)), "\n"); resp.StatusCode != 200 || len(lines) != 3 || !strings.HasPrefix(lines[1], `{"id":7,`) {
		t.Errorf("GET lookup: %d\n%s", resp.StatusCode, body)
	}

	// A time limit shorter than any request.
	c2 := newCLI(t, warehouse, "serve:\n  timeout: 1ns\n")
	t.Setenv("STREAMIDX_SERVE_TOKEN", "")
	_, err = newClient(t, startServe(t, c2), "").Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1"})
	if !client.IsStatus(err, http.StatusRequestTimeout) {
		t.Errorf("past the time limit: %v, want 408", err)
	}
}

// noKeepAlive makes one-off requests that leave no connection open.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// metric reads one sample of the service's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := noKeepAlive.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestServeExactWhileTheDaemonPublishes: `streamidx run --serve` answers
// while it publishes new index snapshots (and expires old ones) under the
// lookups: every answer holds exactly the rows of the table snapshot it
// names, and every range file it read belongs to the one index snapshot
// it names. Range file footers come from the store's cache.
func TestServeExactWhileTheDaemonPublishes(t *testing.T) {
	warehouse, tbl := ordersTable(t, 40)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	addr := testAddr(t)
	startDaemon(t, c, "--serve", "--table", "test.orders", "--index", "pk", "--poll-interval", "50ms", "--http", addr, "--stage-dir", t.TempDir())
	base := "http://" + addr
	cl := newClient(t, base, "")
	ctx := context.Background()

	var mu sync.Mutex
	rowsAt := map[int64]int{tbl.CurrentSnapshot().SnapshotID: 40} // table snapshot -> rows
	waitFor(t, "the first index snapshot", func() bool {
		_, err := cl.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1"})
		return err == nil
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	answers := make([]int, 3)
	for w := range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ans, err := cl.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id >= 0", Explain: true})
				if err != nil {
					t.Errorf("lookup while publishing: %v", err)
					return
				}
				mu.Lock()
				want, known := rowsAt[ans.Header.TableSnapshotID]
				mu.Unlock()
				if !known || len(ans.Rows) != want {
					t.Errorf("answer for table snapshot %d has %d rows, want %d", ans.Header.TableSnapshotID, len(ans.Rows), want)
					return
				}
				var x planner.ExplainLine
				if err := json.Unmarshal(ans.Explain, &x); err != nil {
					t.Error(err)
					return
				}
				in, err := cl.Inspect(ctx, "test.orders", "pk", ans.Header.IndexSnapshotID)
				if err != nil {
					t.Error(err)
					return
				}
				files := map[string]bool{}
				for _, rf := range in.Tracking.RangeFiles {
					files[rf.FilePath] = true
				}
				for _, fp := range x.Explain.Plan.RangeFiles {
					if !files[fp.Path] {
						t.Errorf("answer from index snapshot %d read %s, which is not one of its range files", ans.Header.IndexSnapshotID, fp.Path)
					}
				}
				answers[w]++
			}
		})
	}
	for i := range 8 {
		next, _ := testtables.Append(t, tbl, testtables.OrderRows(40+10*i, 50+10*i, 0)...)
		mu.Lock()
		rowsAt[next.CurrentSnapshot().SnapshotID] = 50 + 10*i
		mu.Unlock()
		tbl = next
		time.Sleep(150 * time.Millisecond)
	}
	waitFor(t, "the index catches up", func() bool {
		ans, err := cl.Lookup(ctx, "test.orders", "pk", client.Request{Where: "id = 1"})
		return err == nil && ans.Header.CommitsBehind == 0 && ans.Header.TableSnapshotID == tbl.CurrentSnapshot().SnapshotID
	})
	close(stop)
	wg.Wait()
	for w, n := range answers {
		if n == 0 {
			t.Errorf("client %d got no answer checked", w)
		}
	}
	if metric(t, base, `streamidx_serve_cache_hits_total{cache="footer"}`) == 0 {
		t.Error("no range file footer came from the cache")
	}
}

// TestServeOverTLS: with serve.tls-cert-file and serve.tls-key-file the
// service answers over HTTPS only: a client that trusts the certificate
// gets the rows of `streamidx lookup --json` and the metrics, one that
// does not is refused the handshake, and a plain HTTP request is refused.
func TestServeOverTLS(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	tbl, _ = testtables.Append(t, tbl, testtables.OrderRows(0, 60, 0)...)
	pair := testtls.Write(t, t.TempDir(), 7)
	c := newCLI(t, warehouse, fmt.Sprintf("serve:\n  tls-cert-file: %s\n  tls-key-file: %s\n", pair.CertFile, pair.KeyFile))
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	trusting, err := client.LoadCA(pair.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: trusting, DisableKeepAlives: true}}
	base := startServeAt(t, c, "https", probe)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base %s", base)
	}

	cl := client.New(base, client.Options{TLSConfig: trusting})
	t.Cleanup(cl.Close)
	ans, err := cl.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id IN (3, 42)"})
	if err != nil {
		t.Fatal(err)
	}
	want := cliRows(t, c, "pk", "id IN (3, 42)", tbl.CurrentSnapshot().SnapshotID)
	if got := rawRows(ans.Rows); !slices.Equal(got, want) || len(got) != 2 {
		t.Errorf("over TLS: %q, want %q", got, want)
	}
	resp, err := probe.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `streamidx_serve_requests_total{`) {
		t.Errorf("metrics over TLS lack streamidx_serve_requests_total:\n%.500s", body)
	}

	stranger := client.New(base, client.Options{})
	t.Cleanup(stranger.Close)
	if _, err := stranger.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: "id = 3"}); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the certificate: %v, want a certificate error", err)
	}
	plain := "http" + strings.TrimPrefix(base, "https")
	resp, err = noKeepAlive.Get(plain + "/v1/tables/test.orders/indexes/pk/lookup?where=id+%3D+3")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("a plain HTTP request was answered 200")
		}
	}
}

// TestServeWarmsBeforeReady: `serve --warm NS.TABLE/INDEX` reads the
// index's pages into the lookup cache before /readyz says ready, so the
// lookups that follow miss nothing; a --warm without an index is refused.
func TestServeWarmsBeforeReady(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	testtables.Append(t, tbl, testtables.OrderRows(0, 300, 0)...)
	c := newCLI(t, warehouse, "")
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")

	base := startWarmServe(t, c, "test.orders/pk")
	lookupCache := func() (entries, misses float64) {
		t.Helper()
		return metric(t, base, `streamidx_serve_cache_entries{cache="lookup"}`), metric(t, base, `streamidx_serve_cache_misses_total{cache="lookup"}`)
	}
	entries, misses := lookupCache()
	if entries == 0 {
		t.Fatalf("the lookup cache is empty once ready: nothing was warmed")
	}
	cl := newClient(t, base, "")
	for _, k := range []int{0, 42, 150, 299} {
		ans, err := cl.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: fmt.Sprintf("id = %d", k)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Rows) != 1 {
			t.Errorf("id = %d: %d rows, want 1", k, len(ans.Rows))
		}
	}
	if _, after := lookupCache(); after != misses {
		t.Errorf("lookups after the warm-up missed the lookup cache %v times", after-misses)
	}

	fs := flag.NewFlagSet("streamidx serve", flag.ContinueOnError)
	g := &globals{stderr: io.Discard}
	g.register(fs)
	if _, err := runServe(context.Background(), g, fs, append(append([]string{}, c.base...), "--warm", "test.orders"), io.Discard); err == nil || !strings.Contains(err.Error(), "NS.TABLE/INDEX") {
		t.Errorf("serve --warm test.orders: %v; want the form NS.TABLE/INDEX asked for", err)
	}
}

// An index whose pages fit in the lookup cache is warmed whole: with a
// cache a quarter larger than all it holds of the index once warmed, a
// lookup of every key after /readyz misses nothing.
func TestServeWarmsAnIndexThatFitsWhole(t *testing.T) {
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	const rows = 3000
	testtables.Append(t, tbl, testtables.OrderRows(0, rows, 0)...)
	// Row groups and files large enough for the pages to be most of what
	// the cache holds of the index, as they are at scale.
	withCache := func(cacheBytes int64) *cli {
		cfg := filepath.Join(t.TempDir(), "streamidx.yaml")
		body := fmt.Sprintf("build:\n  target-file-size: 64KiB\n  row-group-rows: 1024\n  progress: never\nserve:\n  cache-bytes: %d\n", cacheBytes)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newCLI(t, warehouse, "")
		if c.base[0] != "--config" {
			t.Fatalf("newCLI's arguments begin with %q, not --config", c.base[0])
		}
		c.base[1] = cfg // this configuration instead of newCLI's
		return c
	}
	c := withCache(256 << 20)
	createIndex(t, c, "pk")
	c.ok("build", "--table", "test.orders", "--index", "pk")

	// serve starts, warms pk and looks up every key; it reports the cache
	// bytes once ready and the misses of the lookups.
	serve := func(c *cli) (warmed, missed float64) {
		t.Helper()
		base := startWarmServe(t, c, "test.orders/pk")
		warmed = metric(t, base, `streamidx_serve_cache_bytes{cache="lookup"}`)
		before := metric(t, base, `streamidx_serve_cache_misses_total{cache="lookup"}`)
		cl := newClient(t, base, "")
		for k := range rows {
			ans, err := cl.Lookup(context.Background(), "test.orders", "pk", client.Request{Where: fmt.Sprintf("id = %d", k)})
			if err != nil {
				t.Fatal(err)
			}
			if len(ans.Rows) != 1 {
				t.Errorf("id = %d: %d rows, want 1", k, len(ans.Rows))
			}
		}
		return warmed, metric(t, base, `streamidx_serve_cache_misses_total{cache="lookup"}`) - before
	}
	whole, missed := serve(c)
	t.Logf("the index warmed whole: %v bytes", whole)
	if whole == 0 || missed != 0 {
		t.Fatalf("with the default cache: %v bytes warmed, then %v misses; want the index warmed whole", whole, missed)
	}
	size := int64(whole * 1.25)
	warmed, missed := serve(withCache(size))
	if missed != 0 {
		t.Errorf("cache of %d bytes, %v of them warmed: lookups of every key missed %v times; want none (the index's %v bytes fit)", size, warmed, missed, whole)
	}
}

// startWarmServe runs `streamidx serve --warm index` as startServe does and
// waits until its /readyz says the warm-up is done.
func startWarmServe(t *testing.T, c *cli, index string) string {
	t.Helper()
	base := startServe(t, c, "--warm", index)
	waitOK(t, "/readyz after the warm-up", noKeepAlive, base+"/readyz")
	return base
}
