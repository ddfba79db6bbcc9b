package updater

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// layerOf places a package of the module in the layering docs/design.md
// describes: the leaf helpers and the format at the bottom, the stages
// above them, the conductors that drive the stages, the services that run
// the conductors, and the programs on top.
func layerOf(pkg string) (layer int, unit string) {
	p := strings.TrimPrefix(pkg, "github.com/streamidx/streamidx/")
	top, _, _ := strings.Cut(p, "/")
	switch top {
	case "ingest", "staging", "compactor", "flush", "planner":
		return 1, top // planner/source and planner/reconcile are the planner's own
	case "updater", "rewrite":
		return 2, top
	case "daemon", "serve":
		return 3, top
	case "cmd", "itest":
		return 4, p
	}
	return 0, p // format, indexcatalog, api, client, internal/...
}

var layerNames = []string{"leaf helper", "stage", "conductor", "service", "program"}

// TestLayering: no package imports, even through others, a package of a
// higher layer, nor one of its own layer but another unit (a stage never
// another stage, a conductor never another conductor), and ingest links
// neither the Kafka client nor Prometheus: the transport and the metrics
// live with the daemon.
func TestLayering(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "github.com/streamidx/streamidx/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 30 {
		t.Fatalf("go list listed %d packages", len(lines))
	}
	for _, line := range lines {
		f := strings.Fields(line)
		pkg, deps := f[0], f[1:]
		layer, unit := layerOf(pkg)
		for _, d := range deps {
			if unit == "ingest" && (strings.HasPrefix(d, "github.com/twmb/franz-go") || strings.HasPrefix(d, "github.com/prometheus/")) {
				t.Errorf("ingest links %s", d)
			}
			if !strings.HasPrefix(d, "github.com/streamidx/streamidx/") {
				continue
			}
			dl, du := layerOf(d)
			switch {
			case dl > layer:
				t.Errorf("%s (%s) depends on %s (%s)", pkg, layerNames[layer], d, layerNames[dl])
			case dl == layer && layer > 0 && du != unit:
				t.Errorf("%s depends on %s of the same layer (%s)", pkg, d, layerNames[layer])
			}
		}
	}
}
