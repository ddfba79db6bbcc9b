// Package itest holds the integration scenarios of streamidx. Each
// scenario is written once, as a function of the parts it runs on (Parts:
// Kafka brokers, the Iceberg catalog, the warehouse and its IO properties,
// the index catalog), and the stacks run the same functions:
//
//   - stack 1, in `make test`: franz-go's in-process Kafka broker (kfake),
//     the iceberg-go SQL catalog on SQLite, the warehouse on local disk;
//   - stack 2, in `make itest` (build tag itest): PostgreSQL as the Iceberg
//     SQL catalog and the index catalog, SeaweedFS as the S3 store of the
//     warehouse and the index files (scripts/itest-stack.sh starts both),
//     kfake for Kafka;
//   - stack 3, in `make itest` where a Docker engine answers: the official
//     Kafka image (KRaft), MinIO and an Iceberg REST catalog image, through
//     testcontainers-go.
//
// The scenarios drive the streamidx binary as a user would (create, build,
// verify, lookup, inspect, run), write the tables with iceberg-go in the
// test process, and kill the daemon with SIGKILL where they say so. Every
// index snapshot they produce must pass `streamidx verify`.
package itest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	"github.com/apache/iceberg-go/table"
	_ "github.com/lib/pq" // the postgres database/sql driver
	"github.com/uptrace/bun/driver/sqliteshim"
	"gopkg.in/yaml.v3"

	"github.com/streamidx/streamidx/internal/testtables"
)

// Parts are the servers a scenario runs on.
type Parts struct {
	// Kafka are the bootstrap brokers of the commit topic.
	Kafka []string
	// CatalogURI is the Iceberg catalog, as streamidx's --catalog-uri takes
	// it: sqlite:///abs/path.db, postgres://..., http(s):// for REST.
	CatalogURI string
	// Warehouse is the root of new tables: file:///..., s3://bucket/prefix.
	// A REST catalog chooses its own; then it is the root the fs index
	// catalog uses.
	Warehouse string
	// IOProps are iceberg-go's IO properties (s3.endpoint, ...), given to
	// the catalog in the test process and to streamidx.
	IOProps map[string]string
	// IndexCatalog is streamidx's catalog.index-catalog: sql, fs, or ""
	// for streamidx's default (sql with a SQL catalog, fs with REST).
	IndexCatalog string
}

// Stack makes fresh Parts for one scenario: its own warehouse prefix, and
// servers that are either its own or shared with scenarios that keep to
// their own tables and topics.
type Stack func(t *testing.T) Parts

// Binary is the streamidx command the scenarios run: $STREAMIDX_ITEST_BINARY
// when set (make itest builds bin/streamidx first), else built once per test
// process into a temporary directory that Cleanup removes.
func Binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STREAMIDX_ITEST_BINARY"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "streamidx-itest-bin")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		// streamidx hands every command but a lookup of a current index
		// to streamidx-engine, which it finds beside itself.
		for _, name := range []string{"streamidx", "streamidx-engine"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/streamidx/streamidx/cmd/"+name).CombinedOutput()
			if err != nil {
				built.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "streamidx")
}

var built struct {
	once sync.Once
	dir  string
	err  error
}

// Cleanup removes what Binary built. TestMain calls it after the tests.
func Cleanup() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// openCatalog opens the Iceberg catalog of p in the test process, the way
// streamidx opens it, and makes sure namespace testtables.Namespace exists.
func openCatalog(t *testing.T, p Parts) catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	props := iceberg.Properties{"warehouse": p.Warehouse}
	for k, v := range p.IOProps {
		props[k] = v
	}
	var cat catalog.Catalog
	switch {
	case strings.HasPrefix(p.CatalogURI, "sqlite://"):
		path := strings.TrimPrefix(p.CatalogURI, "sqlite://")
		props["type"] = "sql"
		// The daemons share this database: wait for locks as streamidx
		// does instead of failing with SQLITE_BUSY.
		props["uri"] = "file://" + path + "?_busy_timeout=30000&_journal_mode=WAL"
		props[sqlcat.DriverKey] = sqliteshim.ShimName
		props[sqlcat.DialectKey] = string(sqlcat.SQLite)
		c, err := catalog.Load(ctx, "default", props)
		if err != nil {
			t.Fatalf("open sqlite catalog: %v", err)
		}
		t.Cleanup(func() { _ = c.(*sqlcat.Catalog).Close() })
		cat = c
	case strings.HasPrefix(p.CatalogURI, "postgres://"), strings.HasPrefix(p.CatalogURI, "postgresql://"):
		db, err := sql.Open("postgres", p.CatalogURI)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		props["init_catalog_tables"] = "true"
		c, err := sqlcat.NewCatalog("default", db, sqlcat.Postgres, props)
		if err != nil {
			t.Fatalf("open postgres catalog: %v", err)
		}
		cat = c
	case strings.HasPrefix(p.CatalogURI, "http://"), strings.HasPrefix(p.CatalogURI, "https://"):
		c, err := rest.NewCatalog(ctx, "rest", p.CatalogURI, rest.WithAdditionalProps(props))
		if err != nil {
			t.Fatalf("open REST catalog: %v", err)
		}
		cat = c
	default:
		t.Fatalf("catalog uri %q: unsupported", p.CatalogURI)
	}
	err := cat.CreateNamespace(ctx, table.Identifier{testtables.Namespace}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		t.Fatalf("create namespace %s: %v", testtables.Namespace, err)
	}
	return cat
}

// CLI runs the streamidx binary against the parts of a scenario, with a
// configuration file of its own.
type CLI struct {
	t    *testing.T
	bin  string
	base []string
	dir  string // logs of daemons
}

// configFile is the part of streamidx's YAML configuration the scenarios set.
type configFile struct {
	Catalog struct {
		URI          string            `yaml:"uri"`
		Warehouse    string            `yaml:"warehouse"`
		IndexCatalog string            `yaml:"index-catalog,omitempty"`
		Properties   map[string]string `yaml:"properties,omitempty"`
	} `yaml:"catalog"`
	Build struct {
		TargetFileSize string `yaml:"target-file-size"`
		RowGroupRows   int    `yaml:"row-group-rows"`
		Progress       string `yaml:"progress"`
	} `yaml:"build"`
	Run struct {
		RetainSnapshots int `yaml:"retain-snapshots"`
		Kafka           struct {
			Group string `yaml:"group"`
		} `yaml:"kafka"`
	} `yaml:"run"`
}

func newCLI(t *testing.T, p Parts, group string) *CLI {
	t.Helper()
	var c configFile
	c.Catalog.URI = p.CatalogURI
	c.Catalog.Warehouse = p.Warehouse
	c.Catalog.IndexCatalog = p.IndexCatalog
	c.Catalog.Properties = p.IOProps
	// Small range files and row groups, so a few hundred rows make several
	// of each and an update rewrites some files and keeps others.
	c.Build.TargetFileSize = "2KiB"
	c.Build.RowGroupRows = 16
	c.Build.Progress = "never"
	// Every index snapshot is kept, so every one can be verified.
	c.Run.RetainSnapshots = 100000
	c.Run.Kafka.Group = group
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "streamidx.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return &CLI{t: t, bin: Binary(t), base: []string{"--config", path, "--log-level", "warn"}, dir: dir}
}

// Run runs a command to its end and returns its exit code and output.
func (c *CLI) Run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	return c.RunWith(nil, args...)
}

// RunWith is Run with env added to the environment.
func (c *CLI) RunWith(env []string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(append([]string{args[0]}, c.base...), args[1:]...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("streamidx %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errb.String()
}

// OK runs a command that must succeed and returns its standard output.
func (c *CLI) OK(args ...string) string {
	c.t.Helper()
	code, out, errs := c.Run(args...)
	if code != 0 {
		c.t.Fatalf("streamidx %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// NoEngine is the environment of a streamidx that must answer alone: the
// streamidx-engine it names does not exist, so only a lookup that
// streamidx answers itself (of a current index) succeeds.
func (c *CLI) NoEngine() []string {
	return []string{"STREAMIDX_ENGINE=" + filepath.Join(c.dir, "no-engine-here")}
}

// Daemon is a `streamidx run` process.
type Daemon struct {
	cmd *exec.Cmd
	log string
}

// StartDaemon starts `streamidx run` with args after the configuration.
// Its output goes to a log file that a failing test prints.
func (c *CLI) StartDaemon(args ...string) *Daemon {
	c.t.Helper()
	f, err := os.CreateTemp(c.dir, "daemon-*.log")
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(c.bin, append(append([]string{"run"}, c.base...), args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	d := &Daemon{cmd: cmd, log: f.Name()}
	c.t.Cleanup(func() {
		d.Kill()
		if c.t.Failed() {
			data, _ := os.ReadFile(d.log)
			c.t.Logf("daemon log %s:\n%s", d.log, tail(string(data), 4000))
		}
	})
	return d
}

// Kill ends the daemon with SIGKILL, as a crash would, and reaps it.
func (d *Daemon) Kill() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
