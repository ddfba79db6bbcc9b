package httptls

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/streamidx/streamidx/internal/testtls"
)

// serveTLS serves "ok" over TLS with cfg until the test ends and returns
// the base URL.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: cfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String()
}

// served returns the serial number of the certificate a new connection
// to base is given.
func served(t *testing.T, base string, pairs ...testtls.Pair) int64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testtls.Pool(pairs...)}, DisableKeepAlives: true}}
	resp, err := c.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServesTheRotatedCertificate: a certificate replaced on disk is
// served to the next connection; files that change into a pair that does
// not load leave the last good certificate served, with a warning.
func TestServesTheRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	a := testtls.Write(t, dir, 1)
	logs := &syncBuffer{}
	cfg, err := newConfig(a.CertFile, a.KeyFile, slog.New(slog.NewTextHandler(logs, nil)), 0)
	if err != nil {
		t.Fatal(err)
	}
	base := serveTLS(t, cfg)
	if got := served(t, base, a); got != 1 {
		t.Fatalf("served certificate %d, want 1", got)
	}
	b := testtls.Write(t, dir, 2)
	if got := served(t, base, a, b); got != 2 {
		t.Fatalf("after rotation served certificate %d, want 2", got)
	}
	// A key that is not the certificate's: the last good pair stays.
	other := testtls.Write(t, t.TempDir(), 3)
	key, err := os.ReadFile(other.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.KeyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(t, base, a, b); got != 2 {
		t.Fatalf("after a broken rotation served certificate %d, want 2", got)
	}
	if !strings.Contains(logs.String(), "do not load") {
		t.Errorf("no warning of the broken pair:\n%s", logs.String())
	}
}

// TestRefusesFilesThatDoNotLoad: a missing file or a key that does not
// match its certificate fails at start, naming the files.
func TestRefusesFilesThatDoNotLoad(t *testing.T) {
	dir := t.TempDir()
	a := testtls.Write(t, dir, 1)
	if _, err := Config(dir+"/missing.pem", a.KeyFile, nil); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing certificate: %v", err)
	}
	b := testtls.Write(t, t.TempDir(), 2)
	if _, err := Config(a.CertFile, b.KeyFile, nil); err == nil || !strings.Contains(err.Error(), a.CertFile) || !strings.Contains(err.Error(), b.KeyFile) {
		t.Errorf("mismatched pair: %v", err)
	}
}
