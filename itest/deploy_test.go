package itest

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestDashboardQueriesExportedMetrics checks that every metric the Grafana
// dashboard of the deployment stack queries is one the daemon registers.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exported := daemonMetricNames(t)
	data, err := os.ReadFile("../configs/grafana/dashboards/streamidx.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	metricName := regexp.MustCompile(`\bstreamidx_[a-z0-9_]+`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no streamidx metric", p.Title, target.Expr)
			}
			for _, name := range names {
				queried[name] = true
				if exported[name] || exported[histogramBase(name)] {
					continue
				}
				t.Errorf("panel %q: query %q uses %s, which the daemon does not export", p.Title, target.Expr, name)
			}
		}
	}
	// The panels the deployment stack promises.
	for _, name := range []string{"streamidx_flush_commit_lag_seconds_bucket", "streamidx_flush_snapshots_behind",
		"streamidx_flush_commits_total", "streamidx_compactor_written_bytes_total",
		"streamidx_compactor_range_files_rewritten_total", "streamidx_compactor_range_files_reused_total",
		"streamidx_updater_errors_total", "streamidx_ingest_notification_decode_errors_total",
		"streamidx_ingest_notification_timeouts_total", "streamidx_rewrite_equality_files_removed_total",
		"streamidx_ingest_events_dead_lettered_total"} {
		if !queried[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
}

// histogramBase returns the histogram a series name belongs to.
func histogramBase(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// daemonMetricNames builds the daemon on a tiny table and returns the name
// of every metric it registers, observed yet or not.
func daemonMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	cat, warehouse := testtables.NewCatalog(t)
	tbl := testtables.CreateTable(t, cat, testtables.TableConfig{Name: "orders", Schema: testtables.OrdersSchema, FormatVersion: 2})
	testtables.Append(t, tbl, testtables.OrderRows(0, 3, 0)...)
	indexes, err := indexcatalog.NewFS(warehouse)
	if err != nil {
		t.Fatal(err)
	}
	defer indexes.Close()
	cfg := config.Default()
	cfg.Catalog.Warehouse = warehouse
	cfg.Catalog.IndexCatalog = "fs"
	if err := cfg.Set("catalog.uri", "sqlite://"+strings.TrimPrefix(warehouse, "file://")+"/catalog.db"); err != nil {
		t.Fatal(err)
	}
	cfg.Run.Indexes = []config.IndexRef{{Table: testtables.Namespace + ".orders", Index: "pk"}}
	cfg.Run.StageDir = t.TempDir()
	cfg.Run.HTTP = "none"
	reg := &describingRegisterer{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	d, err := daemon.New(cat, indexes, nil, cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) < 10 {
		t.Fatalf("the daemon registered only %v", slices.Sorted(maps.Keys(reg.names)))
	}
	return reg.names
}

// describingRegisterer records the name of every metric a collector
// describes when it is registered: a Gather would leave out labelled
// metrics that have not been observed yet.
type describingRegisterer struct {
	*prometheus.Registry
	names map[string]bool
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *describingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registry.Register(c)
}

func (r *describingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// TestComposeDaemonConfigLoads loads the configuration docker-compose.yml
// gives the daemon, as the daemon would, and the documented example.
func TestComposeDaemonConfigLoads(t *testing.T) {
	for _, path := range []string{"../configs/streamidx-compose.yaml", "../configs/streamidx.example.yaml"} {
		c, err := config.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := c.EnsureDefaults(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	c, _ := config.Load("../configs/streamidx-compose.yaml")
	if c.CatalogKind() != "rest" || c.Catalog.IndexCatalog != "fs" || len(c.Run.Indexes) == 0 || c.Run.HTTP != "0.0.0.0:9464" {
		t.Errorf("the compose configuration is not the stack's: %+v", c)
	}
}

// TestAlertRulesQueryExportedMetrics checks the deployment stack's alerting
// rules: each alert has an expression, a severity and a summary, every
// streamidx metric it queries is one the daemon registers, and Prometheus
// loads the file that docker-compose.yml mounts.
func TestAlertRulesQueryExportedMetrics(t *testing.T) {
	exported := daemonMetricNames(t)
	data, err := os.ReadFile("../configs/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("rules YAML: %v", err)
	}
	metricName := regexp.MustCompile(`\bstreamidx_[a-z0-9_]+`)
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr and a summary", r)
			}
			switch r.Labels["severity"] {
			case "critical", "warning":
			default:
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			for _, name := range metricName.FindAllString(r.Expr, -1) {
				if !exported[name] && !exported[histogramBase(name)] {
					t.Errorf("alert %s: %q uses %s, which the daemon does not export", r.Alert, r.Expr, name)
				}
			}
		}
	}
	for _, want := range []string{"StreamidxDown", "StreamidxIndexHalted", "StreamidxIndexNeverCatchesUp", "StreamidxFreshnessLagHigh"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
	prom, err := os.ReadFile("../configs/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	const mounted = "/etc/prometheus/streamidx-rules.yml"
	if !strings.Contains(string(prom), mounted) || !strings.Contains(string(compose), "./configs/prometheus-rules.yml:"+mounted) {
		t.Errorf("prometheus.yml and docker-compose.yml do not load and mount the rules as %s", mounted)
	}
}
