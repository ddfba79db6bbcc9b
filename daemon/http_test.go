package daemon

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamidx/streamidx/internal/testtls"
)

// TestHTTPOverTLS: with serve.tls-cert-file and serve.tls-key-file the
// daemon's listener (/metrics, /healthz, /readyz and what is mounted on
// it) speaks HTTPS only.
func TestHTTPOverTLS(t *testing.T) {
	h := newHarness(t, 0, "pk")
	pair := testtls.Write(t, t.TempDir(), 9)
	h.cfg.Serve.TLSCertFile, h.cfg.Serve.TLSKeyFile = pair.CertFile, pair.KeyFile
	d := h.start(nil)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testtls.Pool(pair)}, DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := c.Get("https://" + d.Addr() + path)
		if err != nil {
			t.Fatalf("%s over TLS: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s over TLS: %d %s", path, resp.StatusCode, body)
		}
		if path == "/metrics" && !strings.Contains(string(body), "streamidx_") {
			t.Errorf("/metrics over TLS has no streamidx metric")
		}
	}
	if code, _ := d.get(t, "/healthz"); code == http.StatusOK {
		t.Errorf("plain HTTP answered 200")
	}
}

// TestTLSFilesThatDoNotLoadStopTheStart: a key that is not the
// certificate's fails New, naming the files.
func TestTLSFilesThatDoNotLoadStopTheStart(t *testing.T) {
	h := newHarness(t, 0, "pk")
	a, b := testtls.Write(t, t.TempDir(), 1), testtls.Write(t, t.TempDir(), 2)
	h.cfg.Serve.TLSCertFile, h.cfg.Serve.TLSKeyFile = a.CertFile, b.KeyFile
	if d, err := New(h.cat, h.indexes, nil, h.cfg, nil, nil); err == nil || !strings.Contains(err.Error(), b.KeyFile) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("New with a mismatched pair: %v", err)
	}
}
