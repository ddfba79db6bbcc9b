// Package httptls lets streamidx's HTTP listeners speak HTTPS with a
// certificate and key read from PEM files, read again when the files
// change, so that a rotated certificate (a Kubernetes secret updated by
// cert-manager, an ACME client renewing) is served without a restart.
//
// Concurrency: a Config's GetCertificate is called by every TLS handshake
// at once; the certificate it holds is guarded by a mutex.
package httptls

import (
	"crypto/tls"
	"fmt"
	stdlog "log"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrorLog is the logger of an HTTP server's own errors (a failed TLS
// handshake, a plain request to an HTTPS listener) for http.Server's
// ErrorLog: log at debug level, since a port scanner or a misconfigured
// client can cause any number of them.
func ErrorLog(log *slog.Logger) *stdlog.Logger {
	return slog.NewLogLogger(log.Handler(), slog.LevelDebug)
}

// checkEvery is how often a handshake looks at the files again, at most.
const checkEvery = time.Second

// Config returns a server TLS configuration (TLS 1.2 or later) that serves
// the certificate chain of certFile with the private key of keyFile. The
// pair is read now: an error names the file that cannot be read or the
// pair that does not match. Handshakes check the files' size and
// modification time at most once a second and read the pair again when
// either changed; a pair that then fails to load is logged, and the
// certificate read before goes on being served.
func Config(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	return newConfig(certFile, keyFile, log, checkEvery)
}

func newConfig(certFile, keyFile string, log *slog.Logger, every time.Duration) (*tls.Config, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &reloader{certFile: certFile, keyFile: keyFile, log: log, every: every, now: time.Now}
	st, err := r.stamp()
	if err != nil {
		return nil, err
	}
	if r.current, err = r.load(); err != nil {
		return nil, err
	}
	r.seen, r.checked = st, r.now()
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}, nil
}

// reloader holds the certificate served and what the files looked like
// when it was read.
type reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	every             time.Duration
	now               func() time.Time

	mu      sync.Mutex
	current *tls.Certificate
	seen    [2]fileStamp
	checked time.Time
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

func (r *reloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.every {
		r.checked = now
		r.reloadIfChanged()
	}
	return r.current, nil
}

// reloadIfChanged reads the pair again when either file changed since the
// last read (or the last attempt); the caller holds mu.
func (r *reloader) reloadIfChanged() {
	st, err := r.stamp()
	if err != nil {
		r.log.Warn("TLS certificate files cannot be read; serving the certificate read before", "err", err)
		return
	}
	if st == r.seen {
		return
	}
	// Whatever the outcome, this version of the files is not tried
	// again: a certificate written before its key fails once, and loads
	// when the key changes too.
	r.seen = st
	c, err := r.load()
	if err != nil {
		r.log.Warn("TLS certificate files changed but do not load; serving the certificate read before", "err", err)
		return
	}
	r.current = c
	r.log.Info("TLS certificate read again", "cert_file", r.certFile, "not_after", c.Leaf.NotAfter)
}

func (r *reloader) load() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	return &c, nil
}

// stamp is the size and modification time of both files, following
// symbolic links (a Kubernetes secret volume swaps a link).
func (r *reloader) stamp() ([2]fileStamp, error) {
	var st [2]fileStamp
	for i, name := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return st, fmt.Errorf("TLS certificate: %w", err)
		}
		st[i] = fileStamp{size: fi.Size(), modTime: fi.ModTime()}
	}
	return st, nil
}
