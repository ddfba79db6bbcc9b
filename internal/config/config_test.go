package config

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamidx/streamidx/format"
)

func TestDefaultsAreTheEmbeddedSetup(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := "sqlite://" + filepath.Join(wd, "streamidx-data", "catalog.db"); c.Catalog.URI != want {
		t.Errorf("catalog uri %s, want %s", c.Catalog.URI, want)
	}
	if !strings.HasSuffix(c.Catalog.Warehouse, "/streamidx-data/warehouse") || c.Catalog.IndexCatalog != "sql" || c.Catalog.Name != "default" {
		t.Errorf("defaults: %+v", c.Catalog)
	}
	if c.Build.MemoryBudget != 512<<20 || c.Build.TargetFileSize != 4<<20 || c.Build.TargetFileEntries != 131072 {
		t.Errorf("build defaults: %+v", c.Build)
	}
}

func TestFileThenEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("catalog:\n  uri: sqlite:///tmp/x.db\n  name: prod\nbuild:\n  target-file-size: 4MiB\n  target-file-entries: 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMIDX_CATALOG_NAME", "fromenv")
	t.Setenv("STREAMIDX_BUILD_TARGET_FILE_ENTRIES", "65536")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Catalog.URI != "sqlite:///tmp/x.db" || c.Catalog.Name != "fromenv" || c.Build.TargetFileSize != 4<<20 || c.Build.TargetFileEntries != 65536 {
		t.Errorf("got %+v", c)
	}
}

func TestUnknownKeyAndBadValuesAreErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(path, []byte("catalog:\n  urii: x\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "urii") {
		t.Errorf("typo in key: %v", err)
	}
	c := Default()
	c.Catalog.URI = "mysql://x"
	c.Catalog.IndexCatalog = "zk"
	c.Build.Progress = "sometimes"
	c.Build.TargetFileEntries = 0
	c.Serve.TLSCertFile = "cert.pem" // without its key
	c.Run.Kafka.MetadataMaxAge = Duration(2 * time.Hour)
	c.Run.Kafka.SASL.Mechanism = "GSSAPI"
	c.Run.Kafka.TLS.KeyFile = "key.pem" // without its certificate
	c.Run.LongUpdateAfter = Duration(-time.Second)
	err := c.Validate()
	for _, want := range []string{"catalog.uri", "index-catalog", "build.progress", "build.target-file-entries", "serve.tls-key-file",
		"run.kafka.metadata-max-age", `run.kafka.sasl.mechanism "GSSAPI"`, "run.kafka.tls.cert-file", "run.long-update-after"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error about %s, got %v", want, err)
		}
	}
	c = Default()
	c.Catalog.URI = "https://rest.example/api"
	if err := c.EnsureDefaults(); err != nil || c.Catalog.IndexCatalog != "fs" {
		t.Errorf("REST catalog should default to the fs index catalog: %v %q", err, c.Catalog.IndexCatalog)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"512MiB": 512 << 20, "64KiB": 64 << 10, "1GB": 1e9, "100": 100, "1.5MiB": 3 << 19} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
	if _, err := ParseByteSize("lots"); err == nil {
		t.Error("want an error for a size without a number")
	}
	if s := ByteSize(128 << 20).String(); s != "128MiB" {
		t.Errorf("String: %s", s)
	}
}

// TestStagingDirectoryDefaultsBesideTheData: without run.stage-dir the
// staging store lives beside the configured data (the SQLite catalog, else
// a local warehouse), not under whatever directory the daemon was started
// in.
func TestStagingDirectoryDefaultsBesideTheData(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	for _, tc := range []struct{ uri, warehouse, want string }{
		{"sqlite:///srv/streamidx/catalog.db", "s3://bucket/wh", "/srv/streamidx/staging"},
		{"http://rest:8181", "file:///data/lake/warehouse", "/data/lake/staging"},
		{"postgres://db/x", "/data/lake2/warehouse", "/data/lake2/staging"},
		{"http://rest:8181", "s3://bucket/wh", filepath.Join(wd, "streamidx-data", "staging")},
		{"", "", filepath.Join(wd, "streamidx-data", "staging")},
		{"postgres://db/x", "file:///data/lake%20%231/warehouse", "/data/lake #1/staging"},
		{"postgres://db/x", "rel/warehouse", filepath.Join(wd, "rel", "staging")},
	} {
		c := Default()
		c.Catalog.URI, c.Catalog.Warehouse = tc.uri, tc.warehouse
		if err := c.EnsureDefaults(); err != nil {
			t.Fatal(err)
		}
		if c.Run.StageDir != tc.want {
			t.Errorf("catalog %q, warehouse %q: stage dir %s, want %s", tc.uri, tc.warehouse, c.Run.StageDir, tc.want)
		}
	}
}

// TestWarehousePathsBecomeFileURIs: a warehouse given as a local path,
// absolute or relative to the working directory, becomes the file:// URI of
// the absolute directory, percent-encoded so that parsing it gives the
// directory back; a URI stays as it is.
func TestWarehousePathsBecomeFileURIs(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	for in, wantPath := range map[string]string{
		"/data/lake":          "/data/lake",
		"/data/a#b/100%/c?d ": "/data/a#b/100%/c?d ",
		"rel/wh":              filepath.Join(wd, "rel", "wh"),
		"./wh/":               filepath.Join(wd, "wh"),
	} {
		c := Default()
		c.Catalog.Warehouse = in
		if err := c.EnsureDefaults(); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(c.Catalog.Warehouse)
		if err != nil || u.Scheme != "file" || u.Path != wantPath || u.Fragment != "" || u.RawQuery != "" {
			t.Errorf("warehouse %q became %q (%+v, %v), want the file URI of %q", in, c.Catalog.Warehouse, u, err, wantPath)
		}
	}
	for _, uri := range []string{"s3://bucket/wh", "file:///data/x%20y", "gs://b/p"} {
		c := Default()
		c.Catalog.Warehouse = uri
		if err := c.EnsureDefaults(); err != nil {
			t.Fatal(err)
		}
		if c.Catalog.Warehouse != uri {
			t.Errorf("warehouse %q changed to %q", uri, c.Catalog.Warehouse)
		}
	}
	// A REST catalog's warehouse is the server's to read: often the name
	// of a catalog, which is no path.
	c := Default()
	c.Catalog.URI, c.Catalog.Warehouse = "http://polaris:8181/api/catalog", "analytics"
	if err := c.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.Catalog.Warehouse != "analytics" {
		t.Errorf("the REST catalog's warehouse %q became %q", "analytics", c.Catalog.Warehouse)
	}
	// Its fs index catalog then needs a location of its own, and says so.
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "catalog.index-location") {
		t.Errorf("a REST catalog whose warehouse is a name, without an index location: %v, want an error naming catalog.index-location", err)
	}
	c.Catalog.IndexLocation = "s3://bucket/indexes"
	if err := c.Validate(); err != nil || c.IndexRoot() != "s3://bucket/indexes" {
		t.Errorf("with an index location: %v, root %q", err, c.IndexRoot())
	}
	c = Default()
	c.Catalog.IndexLocation = "idx"
	if err := c.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	if want := format.FileURI(filepath.Join(wd, "idx")); c.IndexRoot() != want {
		t.Errorf("a relative index location gave root %q, want %q", c.IndexRoot(), want)
	}
}

// TestSecretsAreNeverPrinted: the service's token and the Kafka password,
// from a file or the environment, print as <redacted>.
func TestSecretsAreNeverPrinted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("catalog:\n  properties:\n    s3.secret-access-key: key-in-file\n    s3.region: us-east-1\n"+
		"serve:\n  token: tok-in-file\nrun:\n  kafka:\n    sasl:\n      mechanism: PLAIN\n      username: u\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMIDX_KAFKA_SASL_PASSWORD", "pw-in-env")
	t.Setenv("STREAMIDX_CATALOG_CREDENTIAL", "id:cred-in-env")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.Run.Kafka.SASL.Password != "pw-in-env" || c.Serve.Token != "tok-in-file" || c.Catalog.Properties["credential"] != "id:cred-in-env" {
		t.Fatalf("secrets not read: %+v %v", c.Run.Kafka.SASL, c.Catalog.Properties)
	}
	out := c.String()
	for _, secret := range []string{"tok-in-file", "pw-in-env", "cred-in-env", "key-in-file"} {
		if strings.Contains(out, secret) {
			t.Errorf("printed configuration holds %s:\n%s", secret, out)
		}
	}
	if strings.Count(out, "<redacted>") != 4 || !strings.Contains(out, "us-east-1") {
		t.Errorf("want four <redacted> values and the region:\n%s", out)
	}
	if c.Catalog.Properties["credential"] != "id:cred-in-env" {
		t.Errorf("printing changed the configuration")
	}
}
