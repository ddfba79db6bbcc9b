package format

import (
	"errors"
	"net/url"
	"path"
	"testing"
)

// TestResolvePath follows the table spec's path rules: a path with a scheme
// is used as it is, one without is joined to the index location with "/",
// and what the rules leave ambiguous is refused.
func TestResolvePath(t *testing.T) {
	const loc = "s3://bucket/wh/orders/indexes/pk"
	for p, want := range map[string]string{
		"s3://other/x.parquet":      "s3://other/x.parquet",
		"file:///tmp/x.parquet":     "file:///tmp/x.parquet",
		"data/0001.parquet":         loc + "/data/0001.parquet",
		"metadata/snap-1.avro":      loc + "/metadata/snap-1.avro",
		"hdfs://nn:8020/idx/a.avro": "hdfs://nn:8020/idx/a.avro",
	} {
		if got, err := ResolvePath(loc, p); err != nil || got != want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	if got, _ := ResolvePath(loc+"/", "data/a.parquet"); got != loc+"/data/a.parquet" {
		t.Errorf("location with a trailing slash: %q", got)
	}
	for _, p := range []string{"/tmp/x.parquet", "C:/x.parquet", "data/../x.parquet", "./data/x.parquet"} {
		if _, err := ResolvePath(loc, p); !errors.Is(err, ErrAmbiguousPath) {
			t.Errorf("ResolvePath(%q): %v, want ErrAmbiguousPath", p, err)
		}
	}
	if _, err := ResolvePath("/tmp/idx", "data/a.parquet"); err == nil {
		t.Errorf("relative path against a location without a scheme: no error")
	}
	for in, want := range map[string]string{"/tmp/wh//x/": "file:///tmp/wh/x", "s3://b/x": "s3://b/x", "file:///a": "file:///a"} {
		if got, err := LocationURI(in); err != nil || got != want {
			t.Errorf("LocationURI(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := LocationURI("warehouse/x"); err == nil {
		t.Errorf("LocationURI of a relative path: no error")
	}
}

// TestLocationURIOfLocalPaths: a local absolute path becomes a file:// URI
// that parses back to it, whatever URI-reserved characters its names hold;
// a URI stays as it is.
func TestLocationURIOfLocalPaths(t *testing.T) {
	for _, p := range []string{"/tmp/x", "/tmp/a#b/c", "/tmp/100%/d?e", "/tmp/with space/f", "/tmp/a/../g/"} {
		got, err := LocationURI(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "file" || u.Host != "" || u.Fragment != "" || u.RawQuery != "" || u.Path != path.Clean(p) {
			t.Errorf("%q -> %q parses as %+v (%v), want the path %q", p, got, u, err, path.Clean(p))
		}
	}
	if got, _ := LocationURI("s3://bucket/a%20b"); got != "s3://bucket/a%20b" {
		t.Errorf("a URI changed: %q", got)
	}
}
