package indexcatalog

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	iceio.Register(gatedScheme, func(context.Context, *url.URL, map[string]string) (iceio.IO, error) {
		return gatedFS{}, nil
	})
	// The S3 client of the backend on S3 (make itest) keeps idle keep-alive
	// connections for the life of the process, as any HTTP client does.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// gatedScheme is local storage whose next metadata publication can be held
// until the test releases it, so a test can let another writer win while a
// commit has already written its file.
const gatedScheme = "gatedfs"

var gate publishGate

type publishGate struct {
	mu      sync.Mutex
	reached chan struct{}
	release chan struct{}
}

// arm makes the next metadata publication signal reached and wait for
// release.
func (g *publishGate) arm() (reached <-chan struct{}, release chan<- struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reached, g.release = make(chan struct{}), make(chan struct{})
	return g.reached, g.release
}

func (g *publishGate) pass(target string) {
	if !strings.HasSuffix(target, ".metadata.json") {
		return
	}
	g.mu.Lock()
	reached, release := g.reached, g.release
	g.reached, g.release = nil, nil
	g.mu.Unlock()
	if reached != nil {
		close(reached)
		<-release
	}
}

// gatedFS is the local file system under gatedfs:// locations.
type gatedFS struct{}

func gatedPath(name string) string { return strings.TrimPrefix(name, gatedScheme+"://") }

func (gatedFS) Open(name string) (iceio.File, error) { return iceio.LocalFS{}.Open(gatedPath(name)) }
func (gatedFS) Remove(name string) error             { return iceio.LocalFS{}.Remove(gatedPath(name)) }
func (gatedFS) ReadFile(name string) ([]byte, error) {
	return iceio.LocalFS{}.ReadFile(gatedPath(name))
}
func (gatedFS) Create(name string) (iceio.FileWriter, error) {
	return iceio.LocalFS{}.Create(gatedPath(name))
}

func (gatedFS) WriteFile(name string, p []byte) error {
	gate.pass(name)
	return iceio.LocalFS{}.WriteFile(gatedPath(name), p)
}

func (gatedFS) Rename(oldpath, newpath string) error {
	gate.pass(newpath)
	return iceio.LocalFS{}.Rename(gatedPath(oldpath), gatedPath(newpath))
}

func (gatedFS) RenameNoReplace(oldpath, newpath string) error {
	gate.pass(newpath)
	return iceio.LocalFS{}.RenameNoReplace(gatedPath(oldpath), gatedPath(newpath))
}
