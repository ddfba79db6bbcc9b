package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/lib/pq" // the postgres database/sql driver

	"github.com/streamidx/streamidx/indexcatalog"
	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/flagcheck"
	"github.com/streamidx/streamidx/internal/objstore"
	"github.com/streamidx/streamidx/internal/predicatearg"
	"github.com/streamidx/streamidx/internal/tablemeta"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/source"
)

// lookupArgs is a `streamidx lookup` command line: the global flags
// (before or after the command) and the lookup's own, as
// streamidx-engine takes them.
type lookupArgs struct {
	configPath, catalogURI, catalogName, warehouse, logLevel string

	table, index     string
	snapshot, limit  int64
	where, whereFile string
	asJSON, explain  bool

	// stdin is what answer read of the standard input (the predicate of
	// --where -), for the engine to read in turn.
	stdin []byte
}

func (q *lookupArgs) globals(fs *flag.FlagSet) {
	fs.StringVar(&q.configPath, "config", q.configPath, "")
	fs.StringVar(&q.catalogURI, "catalog-uri", q.catalogURI, "")
	fs.StringVar(&q.catalogName, "catalog-name", q.catalogName, "")
	fs.StringVar(&q.warehouse, "warehouse", q.warehouse, "")
	fs.StringVar(&q.logLevel, "log-level", q.logLevel, "")
}

// parseLookup parses args as a lookup command line; ok is false for any
// other command line, a help request and flags the engine would refuse
// (the flag sets print nothing: the engine says what is wrong).
func parseLookup(args []string) (q *lookupArgs, ok bool) {
	q = &lookupArgs{}
	pre := flag.NewFlagSet("streamidx", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	q.globals(pre)
	if pre.Parse(args) != nil || pre.NArg() == 0 || pre.Arg(0) != "lookup" {
		return q, false
	}
	fs := flag.NewFlagSet("streamidx lookup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	q.globals(fs)
	fs.StringVar(&q.table, "table", "", "")
	fs.StringVar(&q.index, "index", "", "")
	fs.Int64Var(&q.snapshot, "snapshot", 0, "")
	fs.StringVar(&q.where, "where", "", "")
	fs.StringVar(&q.whereFile, "where-file", "", "")
	fs.BoolVar(&q.asJSON, "json", false, "")
	fs.BoolVar(&q.explain, "explain", false, "")
	fs.Int64Var(&q.limit, "limit", 0, "")
	if fs.Parse(pre.Args()[1:]) != nil || flagcheck.Check(fs, pre.Args()[1:], flagcheck.Global...) != nil {
		return q, false // stray words, a flag given twice: the engine refuses them
	}
	return q, q.table != "" && q.index != "" && q.limit >= 0
}

// answer answers the lookup when its index has an index snapshot built
// for the table snapshot asked for, and prints it as streamidx-engine
// does. handled is false, with nothing printed, when the engine is to
// answer instead: it needs more than the table's metadata, or something
// failed, which the engine then reports in its own words.
func (q *lookupArgs) answer(stdout, stderr io.Writer) (code int, handled bool) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := q.lookup(ctx, stderr)
	var se *stdinError
	if err != nil && (ctx.Err() != nil || errors.As(err, &se)) {
		// Interrupted, the engine would only start over; or the predicate
		// could not be read whole, and the engine must not read part of it.
		fmt.Fprintf(stderr, "streamidx lookup: %v\n", err)
		return 2, true
	}
	if err != nil {
		return 0, false
	}
	defer res.Release()
	if q.asJSON {
		err = res.WriteJSONLines(stdout, q.explain)
	} else {
		err = res.WriteTable(stdout, q.explain)
	}
	if err != nil {
		// Rows may be out already: the engine cannot answer again.
		fmt.Fprintf(stderr, "streamidx lookup: %v\n", err)
		return 2, true
	}
	return 0, true
}

// stdinError is a failure to read the predicate from standard input.
type stdinError struct{ err error }

func (e *stdinError) Error() string {
	return "read the predicate from standard input: " + e.err.Error()
}

func (e *stdinError) Unwrap() error { return e.err }

// errEngine is the lookups this program leaves to the engine without
// trying: a REST catalog, a SQLite catalog not created yet.
var errEngine = errors.New("left to streamidx-engine")

func (q *lookupArgs) lookup(ctx context.Context, stderr io.Writer) (*planner.Result, error) {
	var in io.Reader = os.Stdin
	if q.where == "-" {
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			// Not handed over: the engine would read a predicate cut short.
			return nil, &stdinError{err}
		}
		q.stdin = data
		in = bytes.NewReader(data)
	}
	where, err := predicatearg.Read(q.where, q.whereFile, in)
	if err != nil {
		return nil, err
	}
	pred, err := planner.Parse(where)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Resolve(q.configPath, map[string]string{
		"catalog.uri": q.catalogURI, "catalog.name": q.catalogName,
		"catalog.warehouse": q.warehouse, "log.level": q.logLevel,
	})
	if err != nil {
		return nil, err
	}
	ident, err := config.ParseTable(q.table)
	if err != nil {
		return nil, err
	}
	db, err := openCatalogDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	postgres := cfg.CatalogKind() == "postgres"
	loc, err := tablemeta.NewSQLCatalog(db, postgres, cfg.Catalog.Name).MetadataLocation(ctx, ident)
	if err != nil {
		return nil, err
	}
	log := cfg.Log.Logger(stderr)
	store := objstore.New(objstore.Options{IOProperties: cfg.IOProperties(), Logger: log})
	data, err := store.ReadFile(ctx, loc)
	if err != nil {
		return nil, err
	}
	view, err := tablemeta.Parse(ident, loc, data)
	if err != nil {
		return nil, err
	}
	indexes, err := indexcatalog.Open(ctx, cfg.Catalog.IndexCatalog, db, postgres, cfg.Catalog.Name, cfg.IndexRoot(),
		indexcatalog.WithStore(store), indexcatalog.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer indexes.Close()
	md, _, err := indexes.Load(ctx, ident, q.index)
	if err != nil {
		return nil, err
	}
	if md == nil || !md.Supported() {
		return nil, errEngine
	}
	p := planner.New(planner.Options{Store: store})
	return p.Lookup(ctx, source.Metadata(view), md, planner.Query{Where: where, Parsed: pred, TableSnapshotID: q.snapshot, Limit: q.limit})
}

// openCatalogDB opens the database of a SQL catalog that exists.
func openCatalogDB(ctx context.Context, cfg config.Config) (*sql.DB, error) {
	switch cfg.CatalogKind() {
	case "sqlite":
		path, err := cfg.SQLitePath()
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			return nil, errEngine // the engine creates it, and says what is missing
		}
		return indexcatalog.OpenSQLite(path)
	case "postgres":
		db, err := sql.Open("postgres", cfg.Catalog.URI)
		if err != nil {
			return nil, err
		}
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return db, nil
	}
	return nil, errEngine
}
