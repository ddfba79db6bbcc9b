package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamidx/streamidx/client"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/workload"
)

// The lookup service figures: 8 clients, one commit a second, for a minute
// at a fixed rate and a minute as fast as answered through the service,
// and 20 s for each baseline (whole processes, then filtered scans), or
// less when --duration is shorter.
const (
	serviceClients  = 8
	serviceDuration = time.Minute
	serviceOthers   = 20 * time.Second
	// serviceRate is the rate of the fixed-rate run, the target
	// throughput: p99 is read at it, as latency objectives are.
	serviceRate = 2000
	// serviceUpserts is the size of each commit of the stream: orders at
	// the key tail, which the daemon keeps up with.
	serviceUpserts = 1000
)

// benchService measures the lookup service as an application meets it:
// `streamidx run --serve` in a child process keeps the pk index of the
// append table fresh while another commits an upsert every second; 8
// clients each look up one random order at a time, exact for the table's
// current snapshot, through the service: a minute each client asking
// again as soon as answered (the throughput, and the latency of a
// saturated machine: clients and service share its 2 cores; it also
// warms the service's cache, as a long-running service has it), then a
// minute at 2,000 lookups/s (the latency figures), then the same two
// loads on a server that answers each lookup with a kept answer and does
// nothing else (the floor of the machine: see benchEcho), then as whole
// `streamidx lookup` processes and as iceberg-go scans filtered on the
// key, 20 s each (down to 5 s with a shorter --duration), the commits
// going on throughout.
func benchService(ctx context.Context, b *bench) error {
	if !b.want("service") {
		return nil
	}
	dir, e, id, tbl, err := b.openFreshTable(ctx, appendTable)
	if err != nil {
		return err
	}
	defer e.Close()
	daemon, base, err := b.startDaemon(ctx, dir, "--serve")
	if err != nil {
		return err
	}
	defer daemon.stop()

	// The commits come from a process of their own, as a table's writer
	// is: in this one, the writer's bursts and garbage collections would
	// stall the clients and count as the service's latency.
	first := tbl.CurrentSnapshot().SequenceNumber
	writer, err := b.startChild(ctx, dir, "gen-table", "--table", benchTable, "--rows", strconv.FormatInt(b.rows, 10),
		"--upsert", strconv.Itoa(serviceUpserts), "--pattern", "tail", "--every", "1s", "--seed", "3")
	if err != nil {
		return err
	}
	defer writer.stop()
	stopStream := func() error {
		if ended, err := writer.exited(); ended {
			return err
		}
		return writer.stop()
	}
	key := func() int64 { return rand.Int64N(b.rows) }
	window, others := min(b.duration, serviceDuration), max(min(b.duration/3, serviceOthers), 5*time.Second)
	lookupAt := func(c *client.Client) func(ctx context.Context, _, _ int) error {
		return func(ctx context.Context, _, _ int) error {
			k := key()
			a, err := c.Lookup(ctx, benchTable, "pk", client.Request{Where: fmt.Sprintf("order_id = %d", k)})
			if err == nil && len(a.Rows) != 1 {
				err = fmt.Errorf("order %d: %d rows, want 1", k, len(a.Rows))
			}
			return err
		}
	}
	lookup := lookupAt(client.New(base, client.Options{}))
	// The service's own histogram of lookup times, read around each
	// window: how long the handler took, without the clients' and the
	// network's share of what the clients see.
	read := func() lookupHistogram {
		h, err := readLookupHistogram(ctx, base)
		if err != nil {
			b.note("service: the service's histogram of lookup times is not known: %v", err)
		}
		return h
	}
	b.note("service: %d clients for %s, each asking again as soon as answered (saturating the machine)", serviceClients, window)
	h0 := read()
	sat := client.RunLoad(ctx, serviceClients, window, lookup)
	h1 := read()
	b.note("service: %d clients for %s at %d lookups/s through %s while an upsert of %d orders commits every second", serviceClients, window,
		serviceRate, base, serviceUpserts)
	// Beside it, a thread that only sleeps shows the pauses of the machine
	// itself, which every lookup due during one shares.
	stopProbe, probed := make(chan struct{}), make(chan wakeReport, 1)
	go func() { probed <- runWakeProbe(stopProbe) }()
	svc := client.RunLoadRate(ctx, serviceClients, window, serviceRate, lookup)
	h2 := read()
	close(stopProbe)
	probe := <-probed
	b.note("service: at %d/s: %d lookups, p50 %s, p99 %s, %.0f/s, %d late; %d errors", serviceRate, svc.Lookups, svc.P50, svc.P99, svc.PerSecond,
		svc.Late, svc.Errors)
	b.note("service: meanwhile a thread sleeping 1 ms at a time woke %d times, %d of them over %s late, the latest %s late", probe.Wakeups, probe.Late,
		wakeLate, probe.Worst.Round(100*time.Microsecond))
	rss := daemon.peakRSS()
	b.note("service: saturated: %d lookups, p50 %s, p99 %s, %.0f/s; %d errors; daemon peak RSS %.0f MiB", sat.Lookups, sat.P50, sat.P99,
		sat.PerSecond, sat.Errors, mib(rss))

	echoSat, echoRate, err := b.benchEcho(ctx, dir, base, others, lookupAt)
	if err != nil {
		return errors.Join(err, stopStream())
	}
	exe, err := frontBinary()
	if err != nil {
		return errors.Join(err, stopStream())
	}
	b.note("service: %d clients for %s as whole streamidx lookup processes", serviceClients, others)
	procs := client.RunLoad(ctx, serviceClients, others, func(ctx context.Context, _, _ int) error {
		cmd := exec.CommandContext(ctx, exe, append(childArgs(b, dir), "lookup", "--table", benchTable, "--index", "pk",
			"--where", fmt.Sprintf("order_id = %d", key()), "--json")...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("streamidx lookup: %w: %s", err, out)
		}
		return nil
	})
	// The same as whole streamidx-client processes through the service:
	// what a script that starts a process per key gets.
	var clientProcs *client.LoadResult
	if cl, err := clientBinary(); err != nil {
		b.note("service: %v: the streamidx-client process figures are left out", err)
	} else {
		b.note("service: %d clients for %s as whole streamidx-client processes through the service", serviceClients, others)
		r := client.RunLoad(ctx, serviceClients, others, func(ctx context.Context, _, _ int) error {
			return clientLookup(ctx, cl, base, dir, key())
		})
		clientProcs = &r
	}
	b.note("service: %d clients for %s as iceberg-go scans filtered on the key", serviceClients, others)
	scans := client.RunLoad(ctx, serviceClients, others, func(ctx context.Context, _, _ int) error {
		t, err := e.cat.LoadTable(ctx, id)
		if err != nil {
			return err
		}
		_, recs, err := t.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("order_id"), key()))).ToArrowRecords(ctx)
		if err != nil {
			return err
		}
		var n int64
		for rec, err := range recs {
			if err != nil {
				return err
			}
			n += rec.NumRows()
			rec.Release()
		}
		if n != 1 {
			return fmt.Errorf("filtered scan: %d rows, want 1", n)
		}
		return nil
	})
	if err := stopStream(); err != nil {
		return fmt.Errorf("upsert stream: %w", err)
	}
	if err := daemon.stop(); err != nil {
		return err
	}
	type run struct {
		mode string
		r    client.LoadResult
	}
	runs := []run{{"service", svc}, {"service, saturated", sat}, {"echo", echoRate}, {"echo, saturated", echoSat}, {"process", procs}, {"scan", scans}}
	if clientProcs != nil {
		runs = append(runs, run{"streamidx-client process", *clientProcs})
	}
	for _, r := range runs {
		b.note("service: %s: %d lookups, p50 %s, p99 %s, %.1f/s, %d errors", r.mode, r.r.Lookups, r.r.P50, r.r.P99, r.r.PerSecond, r.r.Errors)
		if r.r.FirstError != nil {
			return fmt.Errorf("service bench, %s: %d of %d lookups failed, the first with: %w", r.mode, r.r.Errors, r.r.Errors+r.r.Lookups, r.r.FirstError)
		}
		if r.r.Lookups == 0 {
			return fmt.Errorf("service bench, %s: no lookup finished in %s", r.mode, r.r.Duration.Round(time.Second))
		}
	}
	if tbl, err = e.cat.LoadTable(ctx, id); err != nil {
		return err
	}
	commits := 0
	for _, sn := range tbl.Metadata().Snapshots() {
		if sn.SequenceNumber > first {
			commits++
		}
	}
	b.note("service: %d commits streamed", commits)
	b.add(figure{Name: "service.p99", Value: ms(svc.P99), Unit: "ms", Baseline: "streamidx lookup process p99", BaselineValue: ptr(ms(procs.P99)),
		Goal: fmt.Sprintf("< 5 ms at %d/s", serviceRate), Met: ptr(ms(svc.P99) < 5 && svc.PerSecond >= 0.98*serviceRate)})
	b.add(figure{Name: "service.p50", Value: ms(svc.P50), Unit: "ms", Baseline: "streamidx lookup process p50", BaselineValue: ptr(ms(procs.P50))})
	b.add(figure{Name: "service.throughput", Value: sat.PerSecond, Unit: "lookups/s", Baseline: "streamidx lookup processes", BaselineValue: ptr(procs.PerSecond),
		Goal: ">= 2000", Met: ptr(sat.PerSecond >= 2000)})
	if r := clientProcs; r != nil {
		b.add(figure{Name: "service.client_process_throughput", Value: r.PerSecond, Unit: "lookups/s", Baseline: "streamidx lookup processes",
			BaselineValue: ptr(procs.PerSecond)})
		b.add(figure{Name: "service.client_process_p50", Value: ms(r.P50), Unit: "ms", Baseline: "streamidx lookup process p50", BaselineValue: ptr(ms(procs.P50))})
		b.add(figure{Name: "service.client_process_p99", Value: ms(r.P99), Unit: "ms", Baseline: "streamidx lookup process p99", BaselineValue: ptr(ms(procs.P99))})
	}
	b.add(figure{Name: "service.scan_throughput", Value: sat.PerSecond, Unit: "lookups/s", Baseline: "iceberg-go filtered scans", BaselineValue: ptr(scans.PerSecond)})
	b.add(figure{Name: "service.saturated_p99", Value: ms(sat.P99), Unit: "ms", Baseline: "streamidx lookup process p99", BaselineValue: ptr(ms(procs.P99)),
		Goal: "< 5 ms", Met: ptr(ms(sat.P99) < 5)})
	b.add(figure{Name: "service.saturated_p50", Value: ms(sat.P50), Unit: "ms", Baseline: "streamidx lookup process p50", BaselineValue: ptr(ms(procs.P50))})
	for _, f := range []struct {
		name         string
		before, past lookupHistogram
		client       time.Duration
		baseline     string
	}{{"service.server_p99", h1, h2, svc.P99, "service.p99 (the clients')"}, {"service.saturated_server_p99", h0, h1, sat.P99, "service.saturated_p99 (the clients')"}} {
		if q, ok := f.past.quantile(0.99, f.before); ok {
			b.add(figure{Name: f.name, Value: q * 1e3, Unit: "ms", Baseline: f.baseline, BaselineValue: ptr(ms(f.client))})
		}
	}
	// The floor of the machine: what the clients see of a server that
	// does nothing, beside what they see of the service.
	b.add(figure{Name: "service.echo_p99", Value: ms(echoRate.P99), Unit: "ms", Baseline: "service.p99", BaselineValue: ptr(ms(svc.P99))})
	b.add(figure{Name: "service.echo_saturated_p99", Value: ms(echoSat.P99), Unit: "ms", Baseline: "service.saturated_p99", BaselineValue: ptr(ms(sat.P99))})
	b.add(figure{Name: "service.echo_throughput", Value: echoSat.PerSecond, Unit: "lookups/s", Baseline: "service.throughput", BaselineValue: ptr(sat.PerSecond)})
	b.add(figure{Name: "service.daemon_rss", Value: mib(rss), Unit: "MiB"})
	b.add(figure{Name: "service.machine_pause_max", Value: ms(probe.Worst), Unit: "ms", Baseline: "service.p99", BaselineValue: ptr(ms(svc.P99))})
	b.add(figure{Name: "service.machine_pauses_per_s", Value: float64(probe.Late) / svc.Duration.Seconds(), Unit: "/s"})
	return nil
}

// benchEcho loads `streamidx echo-serve`, answering every request with a
// real one-key answer of the service at base, with the service's clients
// (lookupAt), as fast as answered and then at the fixed rate, for d each:
// the floor under the service's figures, measured on the same machine in
// the same run, the daemon and the writer going on beside it.
func (b *bench) benchEcho(ctx context.Context, dir, base string, d time.Duration,
	lookupAt func(*client.Client) func(ctx context.Context, _, _ int) error) (sat, fixed client.LoadResult, err error) {
	answer, err := keepAnswer(ctx, base, dir)
	if err != nil {
		return sat, fixed, err
	}
	addr, err := freeAddr()
	if err != nil {
		return sat, fixed, err
	}
	echo, err := b.startChild(ctx, dir, "echo-serve", "--http", addr, "--answer", answer)
	if err != nil {
		return sat, fixed, err
	}
	defer echo.stop()
	ebase := "http://" + addr
	if err := waitReady(ctx, ebase, echo, time.Minute); err != nil {
		return sat, fixed, err
	}
	lookup := lookupAt(client.New(ebase, client.Options{}))
	b.note("service: the floor: %d clients for %s as fast as answered, then at %d/s, through a server that answers each with a kept answer and does nothing else",
		serviceClients, d, serviceRate)
	sat = client.RunLoad(ctx, serviceClients, d, lookup)
	fixed = client.RunLoadRate(ctx, serviceClients, d, serviceRate, lookup)
	b.note("service: the floor: as fast as answered p99 %s at %.0f/s; at %d/s p99 %s", sat.P99, sat.PerSecond, serviceRate, fixed.P99)
	return sat, fixed, echo.stop()
}

// keepAnswer writes the answer of the service at base to a one-key lookup
// to a file in dir, and returns its path.
func keepAnswer(ctx context.Context, base, dir string) (string, error) {
	u := base + "/v1/tables/" + benchTable + "/indexes/pk/lookup?where=" + url.QueryEscape("order_id = 0")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("a one-key answer of the service: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("a one-key answer of the service: %s, %v: %s", resp.Status, err, body)
	}
	path := filepath.Join(dir, "echo-answer.ndjson")
	return path, os.WriteFile(path, body, 0o644)
}

// startDaemon starts `streamidx run` on dir's catalogs as a child process
// that keeps pk fresh (policy latest, polling every 250 ms), with extra
// flags, and waits until it is ready; it returns the child and the base URL
// of its HTTP listener.
func (b *bench) startDaemon(ctx context.Context, dir string, extra ...string) (*background, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := append([]string{"run", "--http", addr, "--table", benchTable, "--index", "pk", "--policy", "latest", "--poll-interval", "250ms"}, extra...)
	daemon, err := b.startChild(ctx, dir, args...)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	if err := waitReady(ctx, base, daemon, 2*time.Minute); err != nil {
		return nil, "", errors.Join(err, daemon.stop())
	}
	return daemon, base, nil
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// childArgs are the global flags of a child streamidx on dir's catalogs.
func childArgs(b *bench, dir string) []string {
	args := []string{"--catalog-uri", config.SQLiteURI(filepath.Join(dir, "catalog.db")), "--warehouse", format.FileURI(filepath.Join(dir, "warehouse")),
		"--log-level", "warn"}
	if b.g.configPath != "" {
		args = append(args, "--config", b.g.configPath)
	}
	return args
}

// background is a child streamidx that runs until stopped.
type background struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
	err    error
	ended  bool
}

// startChild starts this streamidx executable on dir's catalogs in the
// background.
func (b *bench) startChild(ctx context.Context, dir string, args ...string) (*background, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, append(childArgs(b, dir), args...)...)
	cmd.Dir = dir
	bg := &background{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = bg.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start streamidx %s: %w", strings.Join(args, " "), err)
	}
	go func() { bg.done <- cmd.Wait() }()
	return bg, nil
}

// exited reports the child's end, if it ended.
func (bg *background) exited() (bool, error) {
	select {
	case err := <-bg.done:
		bg.ended, bg.err = true, err
		return true, fmt.Errorf("streamidx %s ended: %v\n%s", strings.Join(bg.cmd.Args[1:], " "), err, bg.stderr.String())
	default:
		return bg.ended, bg.err
	}
}

// peakRSS is the child's peak resident memory so far, in bytes, or 0 when
// the system does not say.
func (bg *background) peakRSS() int64 {
	n, err := vmHWM(fmt.Sprintf("/proc/%d/status", bg.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return n
}

// stop ends the child with SIGTERM, as an operator would, and waits for it.
func (bg *background) stop() error {
	if bg.ended {
		return nil
	}
	if err := bg.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-bg.done:
		bg.ended = true
		if err != nil {
			return fmt.Errorf("streamidx %s: %w\n%s", strings.Join(bg.cmd.Args[1:], " "), err, bg.stderr.String())
		}
		return nil
	case <-time.After(time.Minute):
		_ = bg.cmd.Process.Kill()
		bg.ended = true
		return fmt.Errorf("streamidx %s did not stop within a minute of SIGTERM", strings.Join(bg.cmd.Args[1:], " "))
	}
}

// waitReady waits until the daemon at base says it is ready.
func waitReady(ctx context.Context, base string, bg *background, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ended, err := bg.exited(); ended {
			return err
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the daemon at %s was not ready within %s", base, timeout)
}

// benchDaemon measures the memory of `streamidx run` keeping the pk index
// of the append table fresh, in a child process of its own, while an
// upsert of 1,000 tail orders commits every second for min(--duration, 1m).
func benchDaemon(ctx context.Context, b *bench) error {
	if !b.want("daemon") {
		return nil
	}
	dir, e, _, tbl, err := b.openFreshTable(ctx, appendTable)
	if err != nil {
		return err
	}
	defer e.Close()
	daemon, _, err := b.startDaemon(ctx, dir)
	if err != nil {
		return err
	}
	defer daemon.stop()
	window := min(b.duration, serviceDuration)
	b.note("daemon: keeping pk fresh for %s while an upsert of %d orders commits every second", window, serviceUpserts)
	stat := fmt.Sprintf("/proc/%d/stat", daemon.cmd.Process.Pid)
	cpuBefore, cpuErr := procCPU(stat)
	commits, err := workload.Stream(ctx, tbl, workload.StreamOptions{Rows: b.rows, Upserts: serviceUpserts, Pattern: "tail",
		Interval: time.Second, Commits: max(int(window/time.Second), 1), Seed: 5})
	if err != nil {
		return fmt.Errorf("upsert stream: %w", err)
	}
	if ended, err := daemon.exited(); ended {
		return err
	}
	rss := daemon.peakRSS()
	// Its CPU time while the commits came, whatever it did between them
	// (polls, expiries, metadata reads), per commit.
	cpuAfter, err := procCPU(stat)
	if cpuErr == nil {
		cpuErr = err
	}
	if err := daemon.stop(); err != nil {
		return err
	}
	b.note("daemon: %d commits; peak RSS %.0f MiB", len(commits), mib(rss))
	b.add(figure{Name: "daemon.rss", Value: mib(rss), Unit: "MiB", Goal: "< 512", Met: ptr(mib(rss) < 512)})
	if cpuErr != nil {
		b.note("daemon: its CPU time is not known: %v", cpuErr)
		return nil
	}
	perCommit := (cpuAfter - cpuBefore) / time.Duration(max(len(commits), 1))
	b.note("daemon: %s of CPU over %d commits, %s a commit", (cpuAfter - cpuBefore).Round(time.Millisecond), len(commits), perCommit.Round(100*time.Microsecond))
	b.add(figure{Name: "daemon.cpu_per_commit", Value: ms(perCommit), Unit: "ms"})
	return nil
}

// lookupHistogram is the lookup service's histogram of lookup times
// (streamidx_serve_request_seconds{endpoint="lookup"}) as read once:
// cumulative counts by upper bound, in seconds, ascending (the last
// +Inf).
type lookupHistogram []histogramBucket

type histogramBucket struct {
	le    float64
	count uint64
}

// readLookupHistogram reads the lookup service's histogram of lookup times
// from the /metrics of the listener at base.
func readLookupHistogram(ctx context.Context, base string) (lookupHistogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", base, err)
	}
	// Before the first request the histogram has no series.
	for _, m := range families["streamidx_serve_request_seconds"].GetMetric() {
		lookup := false
		for _, l := range m.GetLabel() {
			lookup = lookup || (l.GetName() == "endpoint" && l.GetValue() == "lookup")
		}
		if !lookup || m.GetHistogram() == nil {
			continue
		}
		var h lookupHistogram
		for _, bk := range m.GetHistogram().GetBucket() {
			h = append(h, histogramBucket{bk.GetUpperBound(), bk.GetCumulativeCount()})
		}
		h = append(h, histogramBucket{math.Inf(1), m.GetHistogram().GetSampleCount()})
		return h, nil
	}
	// No lookup answered yet: an empty histogram.
	return lookupHistogram{{math.Inf(1), 0}}, nil
}

// quantile estimates quantile q of the lookup times observed between the
// reading before and this one, as Prometheus's histogram_quantile does:
// linearly within the bucket that holds it, from the bound below it (0 for
// the first); in the +Inf bucket, the largest finite bound. It is false
// when nothing was observed or either reading is missing.
func (h lookupHistogram) quantile(q float64, before lookupHistogram) (float64, bool) {
	if len(h) == 0 || len(before) == 0 {
		return 0, false
	}
	prior := map[float64]uint64{}
	for _, bk := range before {
		prior[bk.le] = bk.count
	}
	delta := func(i int) float64 { return float64(h[i].count - min(prior[h[i].le], h[i].count)) }
	total := delta(len(h) - 1)
	if total == 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i := range h {
		at := delta(i)
		if at >= rank {
			if math.IsInf(h[i].le, 1) {
				return lower, true
			}
			if at == below {
				return h[i].le, true
			}
			return lower + (h[i].le-lower)*(rank-below)/(at-below), true
		}
		lower, below = h[i].le, at
	}
	return lower, true
}
