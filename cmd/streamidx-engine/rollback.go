package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/objstore"
)

func init() {
	register(command{name: "rollback", summary: "make an earlier index snapshot or metadata file current again (repairs a corrupt metadata file)", run: runRollback})
}

// runRollback commits, through the index catalog's compare-and-swap, an
// earlier state of an index as its current metadata: --to SNAPSHOT keeps
// the index snapshots up to that one (found in the current metadata, or,
// when it is corrupt or no longer holds it, in the earlier metadata files
// beside it), --to METADATA makes an earlier metadata file of the index
// current again. The replaced metadata file is logged unless it is
// corrupt; data files are left for expiry.
func runRollback(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	f := addIndexFlags(fs, "")
	to := fs.String("to", "", "index snapshot `id`, or the location of an earlier metadata file of the index")
	if err := f.parse(fs, args, "to"); err != nil {
		return exitError, err
	}
	e, id, err := f.openCatalogs(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	cur, curLoc, err := e.indexes.Load(ctx, id, f.index)
	var corrupt *indexcatalog.CorruptMetadataError
	switch {
	case errors.As(err, &corrupt):
		curLoc, cur = corrupt.Location, nil
		e.log.Warn("the current metadata file is corrupt; it will be replaced, not logged", "index", f.index, "metadata", curLoc, "err", err)
	case err != nil && !errors.Is(err, format.ErrUnsupportedIndexType):
		return exitError, err
	}
	r := &rollback{env: e, index: f.index, cur: cur, curLoc: curLoc}
	target, from, err := r.target(ctx, strings.TrimSpace(*to))
	if err != nil {
		return exitError, fmt.Errorf("index %s of %s: %w", f.index, f.table, err)
	}
	tbl, _, tblErr := e.loadTable(ctx, f.table)
	if tblErr == nil {
		if err := format.CheckTable(target, lineage.View(tbl)); errors.Is(err, format.ErrTableReplaced) {
			return exitError, fmt.Errorf("index %s of %s: %w", f.index, f.table, err)
		}
	}
	if err := r.filesPresent(ctx, target, tbl); err != nil {
		return exitError, fmt.Errorf("index %s of %s: %w", f.index, f.table, err)
	}
	loc, err := e.indexes.Commit(ctx, id, f.index, curLoc, target)
	if err != nil {
		return exitError, fmt.Errorf("roll back index %s of %s: %w", f.index, f.table, err)
	}
	snap := "no snapshot"
	if s := target.CurrentSnapshot(); s != nil {
		snap = fmt.Sprintf("snapshot %d (table snapshot %d)", s.SnapshotID, s.SourceTableSnapshotID)
	}
	e.log.Info("index rolled back", "table", f.table, "index", f.index, "from", from, "replaced", curLoc, "metadata", loc)
	fmt.Fprintf(stdout, "rolled back index %s of %s to %s, from %s\nmetadata: %s\n", f.index, f.table, snap, from, loc)
	return exitOK, nil
}

// rollback finds the state an index rolls back to.
type rollback struct {
	*env
	index  string
	cur    *format.Metadata // nil when the current metadata file is corrupt
	curLoc string
}

// target returns the metadata to commit and the file it comes from.
func (r *rollback) target(ctx context.Context, to string) (*format.Metadata, string, error) {
	if snapID, err := strconv.ParseInt(to, 10, 64); err == nil {
		return r.toSnapshot(ctx, snapID)
	}
	loc := to
	if !format.HasScheme(loc) {
		var err error
		if loc, err = format.LocationURI(loc); err != nil {
			return nil, "", fmt.Errorf("--to %q: want an index snapshot id or a metadata file location: %w", to, err)
		}
	}
	md, err := indexcatalog.ReadMetadata(ctx, r.store, loc)
	if err != nil && !errors.Is(err, format.ErrUnsupportedIndexType) {
		return nil, "", err
	}
	if err := r.sameIndex(md, loc); err != nil {
		return nil, "", err
	}
	return md, loc, nil
}

// toSnapshot keeps the snapshots up to snapID of the newest metadata file
// that holds it: the current one when it can be read, else the earlier
// ones of its metadata log or, when the current file is corrupt, those in
// its directory.
func (r *rollback) toSnapshot(ctx context.Context, snapID int64) (*format.Metadata, string, error) {
	candidates, err := r.earlierFiles(ctx)
	if err != nil {
		return nil, "", err
	}
	if r.cur != nil {
		candidates = append([]string{r.curLoc}, candidates...)
	}
	for _, loc := range candidates {
		md := r.cur
		if loc != r.curLoc {
			if md, err = indexcatalog.ReadMetadata(ctx, r.store, loc); err != nil || r.sameIndex(md, loc) != nil {
				continue // not readable, or not this index's: look further back
			}
		}
		i := slices.IndexFunc(md.Snapshots, func(s format.Snapshot) bool { return s.SnapshotID == snapID })
		if i < 0 {
			continue
		}
		out := md.Clone()
		out.Snapshots = out.Snapshots[:i+1]
		return out, loc, nil
	}
	return nil, "", fmt.Errorf("no metadata file of index %s holds snapshot %d; earlier metadata files, newest first: %s",
		r.index, snapID, strings.Join(candidates, ", "))
}

// earlierFiles lists the metadata files before the current one, newest
// first: the metadata log when the current file can be read, else the
// other *.metadata.json files of its directory.
func (r *rollback) earlierFiles(ctx context.Context) ([]string, error) {
	var out []string
	if r.cur != nil {
		for i := len(r.cur.MetadataLog) - 1; i >= 0; i-- {
			if loc, err := format.ResolvePath(r.cur.Location, r.cur.MetadataLog[i].MetadataFile); err == nil {
				out = append(out, loc)
			}
		}
		return out, nil
	}
	dir := objstore.Dir(r.curLoc)
	entries, err := r.store.ReadDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if loc := objstore.Join(dir, e.Name()); !e.IsDir() && strings.HasSuffix(e.Name(), ".metadata.json") && loc != r.curLoc {
			out = append(out, loc)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return -compareVersions(objstore.Base(a), objstore.Base(b)) })
	return out, nil
}

// sameIndex refuses a metadata file of another index: its index-uuid must
// be the current one's, or, when the current file is corrupt, it must lie
// beside it.
func (r *rollback) sameIndex(md *format.Metadata, loc string) error {
	if md == nil {
		return fmt.Errorf("%s holds no index metadata", loc)
	}
	if r.cur != nil && md.IndexUUID != r.cur.IndexUUID {
		return fmt.Errorf("%s belongs to another index (index-uuid %s, not %s)", loc, md.IndexUUID, r.cur.IndexUUID)
	}
	if r.cur == nil && objstore.CanonicalLocation(objstore.Dir(loc)) != objstore.CanonicalLocation(objstore.Dir(r.curLoc)) {
		return fmt.Errorf("%s belongs to another index: it is not in %s, beside the current metadata file", loc, objstore.Dir(r.curLoc))
	}
	return nil
}

// compareVersions orders metadata file names by the version they start
// with (00012-<uuid>.metadata.json, v12.metadata.json), then by name.
func compareVersions(a, b string) int {
	va, vb := leadingVersion(a), leadingVersion(b)
	if va != vb {
		return va - vb
	}
	return strings.Compare(a, b)
}

func leadingVersion(name string) int {
	name = strings.TrimPrefix(name, "v")
	end := strings.IndexFunc(name, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(name)
	}
	v, _ := strconv.Atoi(name[:end])
	return v
}

// filesPresent checks that the files of the target's current snapshot are
// still there: its tracking file, and (when the table could be loaded to
// read it) every range file it lists. Expiry deletes the files of the
// snapshots it expires but leaves earlier metadata files, which still name
// them; rolling back to such a snapshot would commit an index that no
// lookup or update can read.
func (r *rollback) filesPresent(ctx context.Context, target *format.Metadata, tbl *table.Table) error {
	snap := target.CurrentSnapshot()
	if snap == nil {
		return nil
	}
	gone := func(what, loc string, err error) error {
		return fmt.Errorf("index snapshot %d cannot be rolled back to: its %s %s is gone (expired?): %w; roll back to a newer snapshot, or build the index again",
			snap.SnapshotID, what, loc, err)
	}
	loc, err := format.ResolvePath(target.Location, snap.TrackingFile)
	if err != nil {
		return err
	}
	if tbl == nil {
		f, err := r.store.Open(ctx, loc)
		if err != nil {
			return gone("tracking file", loc, err)
		}
		return f.Close()
	}
	var schema *iceberg.Schema
	if s := tbl.SnapshotByID(snap.SourceTableSnapshotID); s != nil {
		schema = lineage.SnapshotSchema(tbl, s)
	} else {
		schema = tbl.Schema()
	}
	is, err := format.NewIndexSchema(target, schema)
	if err != nil {
		return nil // a schema the index no longer fits: the commands that use it say so
	}
	tr, _, err := r.store.ReadTracking(ctx, target, snap, is)
	if errors.Is(err, fs.ErrNotExist) {
		return gone("tracking file", loc, err)
	}
	if err != nil {
		return err
	}
	for _, te := range tr.Entries {
		f, err := r.store.Open(ctx, te.FilePath)
		if err != nil {
			return gone("range file", te.FilePath, err)
		}
		f.Close()
	}
	return nil
}
