package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// TestKubernetesManifestFitsTheDaemon checks configs/kubernetes/streamidx.yaml
// against what the daemon reads: the ConfigMap's configuration loads and
// validates (with the secrets the pod gets from the environment), the
// container reads it where the ConfigMap is mounted, listens where the
// probes and the Service knock, stages on the persistent volume, and every
// STREAMIDX_ variable it sets is one streamidx reads.
func TestKubernetesManifestFitsTheDaemon(t *testing.T) {
	data, err := os.ReadFile("../configs/kubernetes/streamidx.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type container struct {
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name string `yaml:"name"`
		} `yaml:"env"`
		LivenessProbe  probe `yaml:"livenessProbe"`
		ReadinessProbe probe `yaml:"readinessProbe"`
		StartupProbe   probe `yaml:"startupProbe"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	type doc struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Ports []struct {
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
			Template struct {
				Spec struct {
					Containers []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []struct {
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			} `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	docs := map[string]doc{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d doc
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs[d.Kind] = d
	}
	for _, kind := range []string{"ConfigMap", "Service", "StatefulSet"} {
		if _, ok := docs[kind]; !ok {
			t.Fatalf("no %s in the manifest", kind)
		}
	}

	t.Setenv("STREAMIDX_KAFKA_SASL_PASSWORD", "from-the-secret")
	t.Setenv("STREAMIDX_SERVE_TOKEN", "from-the-secret")
	path := t.TempDir() + "/streamidx.yaml"
	if err := os.WriteFile(path, []byte(docs["ConfigMap"].Data["streamidx.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err == nil {
		err = cfg.EnsureDefaults()
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("the ConfigMap's streamidx.yaml: %v", err)
	}

	c := docs["StatefulSet"].Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "run") || !slices.Contains(c.Args, "/etc/streamidx/streamidx.yaml") {
		t.Errorf("container args %v do not run the daemon on the mounted configuration", c.Args)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["config"] != "/etc/streamidx" {
		t.Errorf("the ConfigMap is mounted at %q, want /etc/streamidx", mounts["config"])
	}
	claims := docs["StatefulSet"].Spec.VolumeClaimTemplates
	if len(claims) != 1 || !strings.HasPrefix(cfg.Run.StageDir, mounts[claims[0].Metadata.Name]+"/") {
		t.Errorf("run.stage-dir %s is not on the persistent volume (mounts %v)", cfg.Run.StageDir, mounts)
	}
	if len(c.Ports) != 1 || !strings.HasSuffix(cfg.Run.HTTP, fmt.Sprintf(":%d", c.Ports[0].ContainerPort)) || !strings.HasPrefix(cfg.Run.HTTP, "0.0.0.0:") {
		t.Errorf("run.http %s does not listen on the container port %+v for other hosts", cfg.Run.HTTP, c.Ports)
	}
	svc := docs["Service"].Spec.Ports
	if len(svc) != 1 || svc[0].TargetPort != c.Ports[0].Name {
		t.Errorf("the Service targets %+v, the container's port is %q", svc, c.Ports[0].Name)
	}
	for probe, want := range map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": "/healthz"} {
		got := map[string]string{"liveness": c.LivenessProbe.HTTPGet.Path, "readiness": c.ReadinessProbe.HTTPGet.Path, "startup": c.StartupProbe.HTTPGet.Path}[probe]
		if got != want {
			t.Errorf("%s probe %q, want %s", probe, got, want)
		}
	}
	for _, p := range []probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p.HTTPGet.Port != c.Ports[0].Name {
			t.Errorf("a probe knocks on port %q, the container's is %q", p.HTTPGet.Port, c.Ports[0].Name)
		}
	}
	for _, e := range c.Env {
		if _, ok := config.Env[e.Name]; strings.HasPrefix(e.Name, "STREAMIDX_") && !ok {
			t.Errorf("the container sets %s, which streamidx does not read", e.Name)
		}
	}
}
