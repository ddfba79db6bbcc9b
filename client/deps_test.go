package client_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goTool is the go command that runs these tests.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("no go command on PATH nor at %s: the import graph cannot be listed", p)
	}
	return p
}

// TestClientLinksOnlyTheServiceVocabulary: the client package and
// streamidx-client link none of iceberg-go, the catalogs, the object
// stores or the planner, whose package initialisation alone takes a whole
// `streamidx lookup` process most of its time; of streamidx, only the
// client, the service's vocabulary (api), internal/buildinfo and
// internal/predicatearg.
func TestClientLinksOnlyTheServiceVocabulary(t *testing.T) {
	for _, pkg := range []string{"github.com/streamidx/streamidx/client", "github.com/streamidx/streamidx/cmd/streamidx-client"} {
		out, err := exec.Command(goTool(t), "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages: %q", pkg, len(deps), deps)
		}
		ours := map[string]bool{
			"github.com/streamidx/streamidx/client":                true,
			"github.com/streamidx/streamidx/api":                   true,
			"github.com/streamidx/streamidx/cmd/streamidx-client":  true,
			"github.com/streamidx/streamidx/internal/buildinfo":    true,
			"github.com/streamidx/streamidx/internal/predicatearg": true,
		}
		for _, d := range deps {
			heavy := strings.HasPrefix(d, "github.com/apache/iceberg-go") || strings.HasPrefix(d, "github.com/substrait-io/") ||
				strings.HasPrefix(d, "modernc.org/sqlite") || strings.HasPrefix(d, "github.com/aws/") || strings.HasPrefix(d, "google.golang.org/grpc") ||
				strings.HasPrefix(d, "github.com/apache/arrow-go/v18/parquet")
			if heavy || (strings.HasPrefix(d, "github.com/streamidx/streamidx/") && !ours[d]) {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
