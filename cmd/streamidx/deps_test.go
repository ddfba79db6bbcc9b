package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLinksNoIcebergTablePackage: streamidx links none of iceberg-go's
// table package (whose initialisation, in table/substrait, takes about 80
// ms of every process that links it), its catalogs, substrait, the Kafka
// client, Pebble or the daemon, so that a lookup process starts in a few
// milliseconds; and none of the packages that need them.
func TestLinksNoIcebergTablePackage(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/streamidx/streamidx/cmd/streamidx").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	var planner bool
	for _, d := range deps {
		planner = planner || d == "github.com/streamidx/streamidx/planner"
		for _, heavy := range []string{"github.com/apache/iceberg-go/table", "github.com/apache/iceberg-go/catalog", "github.com/substrait-io/",
			"github.com/twmb/franz-go", "github.com/cockroachdb/pebble", "github.com/streamidx/streamidx/daemon",
			"github.com/streamidx/streamidx/updater", "github.com/streamidx/streamidx/planner/reconcile",
			"github.com/streamidx/streamidx/internal/lineage", "github.com/streamidx/streamidx/internal/tablescan"} {
			if strings.HasPrefix(d, heavy) {
				t.Errorf("streamidx links %s", d)
			}
		}
	}
	if !planner {
		t.Error("streamidx does not link the planner: the list is not what it seems")
	}
}
