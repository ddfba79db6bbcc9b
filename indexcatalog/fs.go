package indexcatalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/objstore"
)

// FSCatalog is the index catalog kept in the index directories themselves,
// for deployments without a database. The current metadata file of an index
// is its highest-numbered metadata/v<N>.metadata.json; versions start at 1.
// It is safe for concurrent use, also by other processes on the same root.
type FSCatalog struct {
	root   string
	store  *objstore.Store
	logger *slog.Logger
	closed atomic.Bool
}

// NewFS opens the file-system index catalog rooted at root: a local path, a
// file:// URI, or an object store location (s3://bucket/prefix, whose
// store must honour If-None-Match: * on puts, as S3, MinIO and SeaweedFS
// do). Storage that cannot create a file only if it is absent is refused,
// because the catalog's compare-and-swap is exactly that.
func NewFS(root string, opts ...Option) (*FSCatalog, error) {
	if root == "" {
		return nil, errors.New("open index catalog: empty root")
	}
	o := buildOptions(opts)
	exclusive, err := o.store.CanCreateExclusive(context.Background(), root)
	if err != nil {
		return nil, fmt.Errorf("open index catalog at %s: %w", root, err)
	}
	if !exclusive {
		return nil, fmt.Errorf("open index catalog at %s: %w", root, objstore.ErrNoConditionalCreate)
	}
	// Index locations are written as full URIs: a local root becomes file://.
	if root, err = format.LocationURI(strings.TrimRight(root, "/")); err != nil {
		return nil, fmt.Errorf("open index catalog: %w", err)
	}
	return &FSCatalog{root: root, store: o.store, logger: o.logger}, nil
}

// IndexLocation returns where the FS catalog keeps an index:
// <root>/<namespace levels>/<table>/indexes/<name>. Its metadata files are
// under metadata/ there, and the index's data files belong there too.
func (c *FSCatalog) IndexLocation(table []string, name string) (string, error) {
	id, err := newIdent(table, name)
	if err != nil {
		return "", err
	}
	return c.location(id), nil
}

func (c *FSCatalog) location(id ident) string {
	return objstore.Join(c.tableLocation(append(slices.Clone(id.namespace), id.table)), "indexes", id.index)
}

func (c *FSCatalog) tableLocation(table []string) string {
	return objstore.Join(c.root, table...)
}

// Create implements Catalog. An empty md.Location is set to the index's
// location; any other location is an error, because this catalog finds an
// index by its location.
func (c *FSCatalog) Create(ctx context.Context, table []string, name string, md *format.Metadata) (string, error) {
	id, err := c.begin(ctx, table, name)
	if err != nil {
		return "", err
	}
	indexLoc := c.location(id)
	located := *md
	if located.Location == "" {
		located.Location = indexLoc
	} else if strings.TrimRight(located.Location, "/") != indexLoc {
		return "", fmt.Errorf("create index %s: metadata location %s is not the catalog's location %s", id, located.Location, indexLoc)
	}
	p, err := prepareCreate(&located, time.Now())
	if err != nil {
		return "", fmt.Errorf("create index %s: %w", id, err)
	}
	if _, found, err := c.current(ctx, indexLoc); err != nil {
		return "", fmt.Errorf("create index %s: %w", id, err)
	} else if found {
		return "", fmt.Errorf("create index %s: %w", id, ErrIndexExists)
	}
	loc := versionLocation(indexLoc, 1)
	if err := c.store.Publish(ctx, loc, p.data, objstore.CreateOptions{Exclusive: true}); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = ErrIndexExists
		}
		return "", fmt.Errorf("create index %s: %w", id, err)
	}
	p.apply(md)
	return loc, nil
}

// Load implements Catalog.
func (c *FSCatalog) Load(ctx context.Context, table []string, name string) (*format.Metadata, string, error) {
	id, err := c.begin(ctx, table, name)
	if err != nil {
		return nil, "", err
	}
	indexLoc := c.location(id)
	// The highest version can vanish between listing and reading only if the
	// index was dropped, or if it was trimmed by later versions; list again.
	for attempt := 0; ; attempt++ {
		v, found, err := c.current(ctx, indexLoc)
		if err != nil {
			return nil, "", fmt.Errorf("load index %s: %w", id, err)
		}
		if !found {
			return nil, "", fmt.Errorf("load index %s: %w", id, ErrIndexNotFound)
		}
		loc := versionLocation(indexLoc, v)
		md, err := readMetadata(ctx, c.store, loc)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			continue
		}
		if err != nil {
			if errors.Is(err, format.ErrUnsupportedIndexType) {
				return md, loc, fmt.Errorf("load index %s: %w", id, err)
			}
			return nil, "", fmt.Errorf("load index %s: %w", id, err)
		}
		return md, loc, nil
	}
}

// Commit implements Catalog. base must be a version file of the index; the
// new metadata file is the next version, created only if it is absent.
func (c *FSCatalog) Commit(ctx context.Context, table []string, name, base string, md *format.Metadata) (string, error) {
	id, err := c.begin(ctx, table, name)
	if err != nil {
		return "", err
	}
	indexLoc := c.location(id)
	cur, found, err := c.current(ctx, indexLoc)
	if err != nil {
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	if !found {
		return "", fmt.Errorf("commit index %s: %w", id, ErrIndexNotFound)
	}
	if strings.TrimRight(md.Location, "/") != indexLoc {
		return "", fmt.Errorf("commit index %s: metadata location %s is not the catalog's location %s", id, md.Location, indexLoc)
	}
	baseVersion, ok := parseVersionLocation(indexLoc, base)
	if !ok {
		return "", fmt.Errorf("commit index %s: base %s is not a metadata file of this index", id, base)
	}
	// Checking first keeps a stale writer from publishing into a gap left by
	// deleted old versions, where the create would not collide.
	if cur != baseVersion {
		return "", fmt.Errorf("commit index %s: %w: base is version %d, current is %d", id, ErrCommitConflict, baseVersion, cur)
	}
	baseMd, err := readMetadata(ctx, c.store, base)
	if errors.Is(err, fs.ErrNotExist) {
		if cerr := c.checkBase(ctx, indexLoc, baseVersion); cerr != nil {
			return "", fmt.Errorf("commit index %s: %w", id, cerr)
		}
	}
	// A corrupt base can only be named by a rollback (Load refuses it),
	// which replaces it: the swap still requires it to be current.
	if err != nil && !errors.Is(err, format.ErrUnsupportedIndexType) && !format.IsCorruption(err) {
		return "", fmt.Errorf("commit index %s: read base: %w", id, err)
	}
	p, err := prepareCommit(md, base, baseMd, time.Now())
	if err != nil {
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	loc := versionLocation(indexLoc, baseVersion+1)
	if err := c.store.Publish(ctx, loc, p.data, objstore.CreateOptions{Exclusive: true}); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w: version %d was committed by another writer", ErrCommitConflict, baseVersion+1)
		}
		return "", fmt.Errorf("commit index %s: %w", id, err)
	}
	if deleteTrimmed(p.md.Properties) {
		removeQuietly(ctx, c.store, c.logger, "trimmed from metadata log", p.trimmed...)
	}
	p.apply(md)
	return loc, nil
}

// List implements Catalog: the indexes of a table are the directories under
// <table location>/indexes that hold at least one version file.
func (c *FSCatalog) List(ctx context.Context, table []string) ([]string, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkTable(table); err != nil {
		return nil, err
	}
	dir := objstore.Join(c.tableLocation(table), "indexes")
	entries, err := c.store.ReadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list indexes of %q: %w", table, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || checkName("index name", e.Name()) != nil {
			continue
		}
		_, found, err := c.current(ctx, objstore.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("list indexes of %q: %w", table, err)
		}
		if found {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// Drop implements Catalog by deleting the index's version files, oldest
// first, so that an interrupted drop leaves the index as it was and can be
// repeated. Other files under the index location stay. A commit racing with
// the drop may keep the index alive.
func (c *FSCatalog) Drop(ctx context.Context, table []string, name string) error {
	id, err := c.begin(ctx, table, name)
	if err != nil {
		return err
	}
	indexLoc := c.location(id)
	versions, err := c.versions(ctx, indexLoc)
	if err != nil {
		return fmt.Errorf("drop index %s: %w", id, err)
	}
	if len(versions) == 0 {
		return fmt.Errorf("drop index %s: %w", id, ErrIndexNotFound)
	}
	for _, v := range versions {
		loc := versionLocation(indexLoc, v)
		if err := c.store.Remove(ctx, loc); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drop index %s: delete %s: %w", id, loc, err)
		}
	}
	return nil
}

// Close implements Catalog.
func (c *FSCatalog) Close() error {
	c.closed.Store(true)
	return nil
}

func (c *FSCatalog) begin(ctx context.Context, table []string, name string) (ident, error) {
	if c.closed.Load() {
		return ident{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return ident{}, err
	}
	return newIdent(table, name)
}

func (c *FSCatalog) checkBase(ctx context.Context, indexLoc string, baseVersion int64) error {
	cur, found, err := c.current(ctx, indexLoc)
	switch {
	case err != nil:
		return err
	case !found:
		return ErrIndexNotFound
	case cur != baseVersion:
		return fmt.Errorf("%w: base is version %d, current is %d", ErrCommitConflict, baseVersion, cur)
	}
	return nil
}

// current returns the highest version of an index.
func (c *FSCatalog) current(ctx context.Context, indexLoc string) (int64, bool, error) {
	versions, err := c.versions(ctx, indexLoc)
	if err != nil || len(versions) == 0 {
		return 0, false, err
	}
	return versions[len(versions)-1], true, nil
}

// versions lists the version files of an index, in ascending order.
func (c *FSCatalog) versions(ctx context.Context, indexLoc string) ([]int64, error) {
	entries, err := c.store.ReadDir(ctx, objstore.Join(indexLoc, "metadata"))
	if err != nil {
		return nil, err
	}
	var versions []int64
	for _, e := range entries {
		if v, ok := parseVersionName(e.Name()); ok && !e.IsDir() {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return versions, nil
}

func versionLocation(indexLoc string, v int64) string {
	return objstore.Join(indexLoc, "metadata", "v"+strconv.FormatInt(v, 10)+".metadata.json")
}

// parseVersionLocation returns the version of a version file of the index
// at indexLoc.
func parseVersionLocation(indexLoc, loc string) (int64, bool) {
	dir := objstore.Join(indexLoc, "metadata")
	if objstore.Dir(loc) != dir {
		return 0, false
	}
	return parseVersionName(objstore.Base(loc))
}

// parseVersionName accepts exactly the names versionLocation writes, so
// that no two names mean one version and temporary files are not versions.
func parseVersionName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, "v")
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ".metadata.json")
	if !ok || digits == "" || digits[0] == '0' {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}
