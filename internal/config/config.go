// Package config is streamidx's configuration: one YAML file whose every key
// has a documented default (configs/streamidx.example.yaml), overridden by
// STREAMIDX_* environment variables and then by command-line flags. The same
// structs validate and print themselves.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/streamidx/streamidx/format"
)

// DefaultDataDir is where the embedded default keeps everything when nothing
// is configured: the SQLite catalog and the warehouse.
const DefaultDataDir = "streamidx-data"

// Config is the whole configuration.
type Config struct {
	Catalog CatalogConfig `yaml:"catalog"`
	Build   BuildConfig   `yaml:"build"`
	Run     RunConfig     `yaml:"run"`
	Serve   ServeConfig   `yaml:"serve"`
	Log     LogConfig     `yaml:"log"`
}

// ServeConfig configures the lookup service: `streamidx serve`, and
// `streamidx run --serve` on the run.http listener.
type ServeConfig struct {
	// HTTP is the listen address of `streamidx serve` (run --serve uses
	// run.http). Default: 127.0.0.1:9465.
	HTTP string `yaml:"http"`
	// Token, when set, is required of every request as "Authorization:
	// Bearer <token>"; it is never logged nor printed. Prefer the
	// environment variable STREAMIDX_SERVE_TOKEN to a file. Default: none.
	Token string `yaml:"token"`
	// TLSCertFile and TLSKeyFile, when set (both), make streamidx's HTTP
	// listeners (serve.http, and run.http) speak HTTPS with this PEM
	// certificate chain and private key, read again when the files
	// change. Default: none (plain HTTP).
	TLSCertFile string `yaml:"tls-cert-file"`
	TLSKeyFile  string `yaml:"tls-key-file"`
	// CacheBytes bounds what the lookup service keeps in memory of the
	// files it reads: range file footers (a sixteenth), and decoded pages,
	// page indexes and reconciliations of lagging index snapshots (the
	// rest). Default: 256MiB.
	CacheBytes ByteSize `yaml:"cache-bytes"`
	// MaxPredicateBytes bounds a lookup's predicate. Default: 64KiB.
	MaxPredicateBytes ByteSize `yaml:"max-predicate-bytes"`
	// MaxRows bounds the rows of an answer: a lookup that would return
	// more is refused unless it gives a smaller limit. Default: 100000.
	MaxRows int64 `yaml:"max-rows"`
	// Timeout bounds the time a request may take. Default: 30s.
	Timeout Duration `yaml:"timeout"`
	// MaxConcurrentRequests bounds the requests answered at once; one
	// beyond waits up to MaxQueueWait for a slot, then gets a 503 with
	// Retry-After. Default: 256.
	MaxConcurrentRequests int `yaml:"max-concurrent-requests"`
	// MaxQueueWait is how long a request waits for a slot. Default: 1s.
	MaxQueueWait Duration `yaml:"max-queue-wait"`
	// Warm makes `run --serve` read the pages of each index it keeps
	// fresh into the cache (up to 7/8 of CacheBytes, shared by the
	// indexes) once the index caught up, before /readyz says ready, and
	// `serve` those of the indexes its --warm flags name before it
	// listens. Default: true.
	Warm bool `yaml:"warm"`
	// MetadataMaxAge is how long table and index metadata, once read,
	// answer before they are read again; an answer for the current table
	// snapshot may be for one up to this much older than the newest
	// commit (its header says which). Default: 1s.
	MetadataMaxAge Duration `yaml:"metadata-max-age"`
}

// RunConfig configures the daemon, streamidx run.
type RunConfig struct {
	// Indexes are the (table, index) pairs to keep fresh. Default: none
	// (give them here or as --table/--index flags).
	Indexes []IndexRef `yaml:"indexes"`
	// PollInterval is how often the catalog is polled for new snapshots
	// when no notification arrives. Default: 10s.
	PollInterval Duration `yaml:"poll-interval"`
	// Policy is every (one index snapshot per source snapshot), latest
	// (skip to the newest when behind) or adaptive (every while the index
	// keeps up, latest when it falls behind by more than run.adaptive
	// says). Default: every.
	Policy string `yaml:"policy"`
	// Adaptive says when policy adaptive skips to the newest snapshot.
	Adaptive AdaptiveConfig `yaml:"adaptive"`
	// HTTP is the listen address of /metrics, /healthz and /readyz; empty
	// turns the server off. Default: 127.0.0.1:9464.
	HTTP string `yaml:"http"`
	// StageDir holds the Pebble staging store. Default: staging/ beside the
	// SQLite catalog file, else beside a local warehouse, else
	// ./streamidx-data/staging.
	StageDir string `yaml:"stage-dir"`
	// Kafka carries the commit notifications. Default: no Kafka; poll.
	Kafka KafkaConfig `yaml:"kafka"`
	// MaxParallelUpdates bounds how many indexes are updated at the same
	// time; each index has its own worker and none waits for another, but
	// updates share the machine. Default: 4.
	MaxParallelUpdates int `yaml:"max-parallel-updates"`
	// LongUpdateAfter is how long an update runs before it counts as long:
	// from then on its merge or build pauses while a shorter update of
	// another index runs (never for longer in all than it has run), so that
	// a primary-key index's small updates keep their freshness beside a
	// bucketed index that rewrites itself. 0 turns the pauses off.
	// Default: 500ms.
	LongUpdateAfter Duration `yaml:"long-update-after"`
	// RetainSnapshots index snapshots are kept by expiry. Default: 10.
	RetainSnapshots int `yaml:"retain-snapshots"`
	// MaxSnapshotAge expires older index snapshots too; 0 means no age
	// limit. Default: 0.
	MaxSnapshotAge Duration `yaml:"max-snapshot-age"`
	// RebuildOnCorruption rebuilds an index from its table when one of its
	// tracking or range files is corrupt, instead of halting it; the
	// rebuild is logged with the file. A corrupt metadata file still halts
	// (streamidx rollback repairs it). Default: false.
	RebuildOnCorruption bool `yaml:"rebuild-on-corruption"`
	// RewriteDeletes turns equality deletes into deletion vectors after an
	// index snapshot is published. Default: off.
	RewriteDeletes RewriteDeletesConfig `yaml:"rewrite-deletes"`
}

// RewriteDeletesConfig is what the daemon does about equality deletes.
type RewriteDeletesConfig struct {
	// Enabled: after publishing an index snapshot that brings an index with
	// _file and _pos up to its table, rewrite the table's equality delete
	// files into deletion vectors (v3) or position delete files (v2)
	// through that index. Default: false.
	Enabled bool `yaml:"enabled"`
	// MinFiles is the number of live equality delete files below which no
	// rewrite runs. Default: 1.
	MinFiles int `yaml:"min-files"`
}

// AdaptiveConfig bounds how far behind policy adaptive lets an index fall
// before it skips to the newest source snapshot.
type AdaptiveConfig struct {
	// MaxSnapshotsBehind is how many source snapshots newer than the
	// indexed one are tolerated. Default: 10.
	MaxSnapshotsBehind int `yaml:"max-snapshots-behind"`
	// MaxLag is how long the oldest source snapshot not yet indexed may
	// have waited since its commit. Default: 10s.
	MaxLag Duration `yaml:"max-lag"`
}

// IndexRef names an index of a table.
type IndexRef struct {
	Table string `yaml:"table"`
	Index string `yaml:"index"`
}

// KafkaConfig is where commit notifications come from.
type KafkaConfig struct {
	// Brokers are bootstrap servers host:port. Default: none.
	Brokers []string `yaml:"brokers"`
	// CommitTopic carries commit notifications. Default: streamidx-commits.
	CommitTopic string `yaml:"commit-topic"`
	// Group is the consumer group. Default: streamidx.
	Group string `yaml:"group"`
	// DeadLetterTopic receives undecodable records and notifications that
	// timed out. Default: <commit-topic>.dlq.
	DeadLetterTopic string `yaml:"dead-letter-topic"`
	// NotificationTimeout bounds how long a notification waits for its
	// snapshot to appear in the table's current history (a typo, a
	// rolled-back commit never does); then it goes to the dead-letter topic
	// and stops holding its partition's committed offset. Default: 2m.
	NotificationTimeout Duration `yaml:"notification-timeout"`
	// CatchUpTimeout bounds how long the indexes of tables with change
	// topics wait at start for the change feed to read the commit topic up
	// to the end it had then, so that their first build finds the
	// notification that gives it a position in the feed. Default: 30s.
	CatchUpTimeout Duration `yaml:"catch-up-timeout"`
	// CommitFormat is the format of the commit topic: native (streamidx's
	// JSON notifications) or kafka-connect (the Apache Iceberg Kafka Connect
	// sink's control topic). Default: native.
	CommitFormat string `yaml:"commit-format"`
	// MetadataMaxAge is how often the brokers are asked again for the
	// partitions of the commit topic and the change topics: a partition
	// added to one is read from its start within this time. Default: 30s.
	MetadataMaxAge Duration `yaml:"metadata-max-age"`
	// ChangeTopics feed the events-fed indexes: TOPIC or TOPIC=NS.TABLE.
	// Default: none.
	ChangeTopics []string `yaml:"change-topics"`
	// DebeziumDecimalHandling is Debezium's decimal.handling.mode of events
	// written without a schema: precise, string or double. Default: precise.
	DebeziumDecimalHandling string `yaml:"debezium-decimal-handling"`
	// EmbeddedBroker, when set, is the host:port of an in-process Kafka
	// broker (kfake) that run starts and uses as its brokers. Default: none.
	EmbeddedBroker string `yaml:"embedded-broker"`
	// TLS encrypts the connections to the brokers. Default: off.
	TLS KafkaTLSConfig `yaml:"tls"`
	// SASL authenticates to the brokers. Default: none.
	SASL KafkaSASLConfig `yaml:"sasl"`
}

// KafkaTLSConfig is run.kafka.tls.
type KafkaTLSConfig struct {
	// Enabled turns TLS on; giving any file turns it on too.
	Enabled bool `yaml:"enabled"`
	// CAFile holds the PEM certificates of the authorities that sign the
	// brokers' certificates. Default: the system's roots.
	CAFile string `yaml:"ca-file"`
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// for brokers that require one. Default: none.
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
	// ServerName is the name checked in the brokers' certificates.
	// Default: the host of the address dialed.
	ServerName string `yaml:"server-name"`
}

// On reports whether connections to the brokers use TLS.
func (t KafkaTLSConfig) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != ""
}

// KafkaSASLConfig is run.kafka.sasl.
type KafkaSASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty for none.
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	// Password is never logged nor printed; prefer the environment
	// variable STREAMIDX_KAFKA_SASL_PASSWORD to a file.
	Password string `yaml:"password"`
}

// ChangeTopic is one entry of run.kafka.change-topics.
type ChangeTopic struct {
	Topic string
	// Table is the table the topic feeds; "" when records name their table.
	Table string
}

// ParseChangeTopics reads run.kafka.change-topics.
func (k KafkaConfig) ParseChangeTopics() ([]ChangeTopic, error) {
	var out []ChangeTopic
	seen := map[string]bool{}
	for _, s := range k.ChangeTopics {
		topic, tbl, _ := strings.Cut(s, "=")
		topic = strings.TrimSpace(topic)
		if topic == "" || strings.ContainsAny(topic, "\x00 ") {
			return nil, fmt.Errorf("run.kafka.change-topics %q: want TOPIC or TOPIC=NS.TABLE", s)
		}
		if tbl = strings.TrimSpace(tbl); tbl != "" {
			if _, err := ParseTable(tbl); err != nil {
				return nil, fmt.Errorf("run.kafka.change-topics %q: %w", s, err)
			}
		}
		if seen[topic] {
			return nil, fmt.Errorf("run.kafka.change-topics: topic %s is listed twice", topic)
		}
		seen[topic] = true
		out = append(out, ChangeTopic{Topic: topic, Table: tbl})
	}
	return out, nil
}

// CatalogConfig says where tables and indexes live.
type CatalogConfig struct {
	// URI of the Iceberg catalog: sqlite:///abs/path.db, postgres://..., or
	// http(s):// for a REST catalog. Default: sqlite:///<cwd>/streamidx-data/catalog.db.
	URI string `yaml:"uri"`
	// Name of the catalog inside a shared SQL catalog database, so tables
	// written by other tools under that name are seen. Default: default.
	Name string `yaml:"name"`
	// Warehouse is the root location of new tables; with a SQL catalog a
	// local path (absolute, or relative to the working directory) is taken
	// as the file:// URI of the absolute directory, while a REST catalog
	// gets it as it is (a catalog's name, say). Default:
	// file:///<cwd>/streamidx-data/warehouse.
	Warehouse string `yaml:"warehouse"`
	// IndexCatalog is where index pointers live: "sql" (a table in the SQL
	// catalog database) or "fs" (conditional create of metadata files beside
	// each index). Default: sql for SQL catalogs, fs otherwise.
	IndexCatalog string `yaml:"index-catalog"`
	// IndexLocation is where the fs index catalog keeps indexes
	// (<location>/<namespace>/<table>/indexes/<name>): a URI, or a local
	// path taken as the file:// URI of the absolute directory. A REST
	// catalog whose warehouse is a name rather than a location needs it.
	// Default: the warehouse.
	IndexLocation string `yaml:"index-location"`
	// Properties are passed to iceberg-go's catalog and file IO, e.g.
	// s3.endpoint, s3.region, s3.path-style-access. Default: none.
	Properties map[string]string `yaml:"properties"`
}

// BuildConfig tunes full builds and range-file writing.
type BuildConfig struct {
	// MemoryBudget bounds the entries a build sorts in memory before it
	// spills to disk. Default: 512MiB.
	MemoryBudget ByteSize `yaml:"memory-budget"`
	// TargetFileSize is the size range files aim for: builds and merges
	// keep them between half and one and a half of it, and a commit
	// rewrites only the files its keys fall into. Larger files mean fewer
	// files and larger rewrites. Default: 4MiB.
	TargetFileSize ByteSize `yaml:"target-file-size"`
	// TargetFileEntries is the number of entries range files aim for,
	// whatever their size: a file reaches its target at whichever of the
	// two it reaches first, so an index of narrow entries (millions fit in
	// a few MiB) still rewrites little per commit. Default: 131072.
	TargetFileEntries int64 `yaml:"target-file-entries"`
	// RowGroupRows caps the rows of one Parquet row group. Default: 131072.
	RowGroupRows int `yaml:"row-group-rows"`
	// SpillDir holds sorted runs during a build. Default: the OS temp dir.
	SpillDir string `yaml:"spill-dir"`
	// Progress shows a progress line on stderr: auto (when it is a
	// terminal), always or never. Default: auto.
	Progress string `yaml:"progress"`
}

// LogConfig sets up log/slog.
type LogConfig struct {
	// Level is debug, info, warn or error. Default: info.
	Level string `yaml:"level"`
	// Format is text or json. Default: text.
	Format string `yaml:"format"`
}

// Default returns the configuration used when nothing is given: the
// embedded default under ./streamidx-data/.
func Default() Config {
	return Config{
		Catalog: CatalogConfig{Name: "default"},
		Build: BuildConfig{
			MemoryBudget:      512 << 20,
			TargetFileSize:    4 << 20,
			TargetFileEntries: 128 << 10,
			RowGroupRows:      128 * 1024,
			Progress:          "auto",
		},
		Run: RunConfig{
			PollInterval: Duration(10 * time.Second),
			Policy:       "every",
			Adaptive:     AdaptiveConfig{MaxSnapshotsBehind: 10, MaxLag: Duration(10 * time.Second)},
			HTTP:         "127.0.0.1:9464",
			Kafka: KafkaConfig{CommitTopic: "streamidx-commits", Group: "streamidx",
				NotificationTimeout: Duration(2 * time.Minute), CatchUpTimeout: Duration(30 * time.Second), CommitFormat: "native", DebeziumDecimalHandling: "precise",
				MetadataMaxAge: Duration(30 * time.Second)},
			MaxParallelUpdates: 4,
			LongUpdateAfter:    Duration(500 * time.Millisecond),
			RetainSnapshots:    10,
			RewriteDeletes:     RewriteDeletesConfig{MinFiles: 1},
		},
		Serve: ServeConfig{HTTP: "127.0.0.1:9465", CacheBytes: 256 << 20, MaxPredicateBytes: 64 << 10, MaxRows: 100000,
			Timeout: Duration(30 * time.Second), MetadataMaxAge: Duration(time.Second), MaxConcurrentRequests: 256, MaxQueueWait: Duration(time.Second), Warm: true},
		Log: LogConfig{Level: "info", Format: "text"},
	}
}

// Load reads a YAML file (when path is not empty) over the defaults, then
// applies the environment. Unknown keys are an error, so a typo does not
// silently fall back to a default.
func Load(path string) (Config, error) {
	c := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // an empty file means all defaults
			return c, fmt.Errorf("parse config %s: %w", path, err)
		}
	}
	if err := c.applyEnv(os.LookupEnv); err != nil {
		return c, err
	}
	return c, nil
}

// Env lists the environment variables that override config keys.
var Env = map[string]string{
	"STREAMIDX_CATALOG_URI":               "catalog.uri",
	"STREAMIDX_CATALOG_NAME":              "catalog.name",
	"STREAMIDX_WAREHOUSE":                 "catalog.warehouse",
	"STREAMIDX_INDEX_CATALOG":             "catalog.index-catalog",
	"STREAMIDX_INDEX_LOCATION":            "catalog.index-location",
	"STREAMIDX_KAFKA_BROKERS":             "run.kafka.brokers",
	"STREAMIDX_BUILD_MEMORY_BUDGET":       "build.memory-budget",
	"STREAMIDX_BUILD_TARGET_FILE_SIZE":    "build.target-file-size",
	"STREAMIDX_BUILD_TARGET_FILE_ENTRIES": "build.target-file-entries",
	"STREAMIDX_BUILD_ROW_GROUP_ROWS":      "build.row-group-rows",
	"STREAMIDX_LOG_LEVEL":                 "log.level",
	"STREAMIDX_LOG_FORMAT":                "log.format",
	"STREAMIDX_SERVE_TOKEN":               "serve.token",
	"STREAMIDX_CATALOG_TOKEN":             "catalog.properties.token",
	"STREAMIDX_CATALOG_CREDENTIAL":        "catalog.properties.credential",
	"STREAMIDX_KAFKA_SASL_USERNAME":       "run.kafka.sasl.username",
	"STREAMIDX_KAFKA_SASL_PASSWORD":       "run.kafka.sasl.password",
}

func (c *Config) applyEnv(lookup func(string) (string, bool)) error {
	for env, key := range Env {
		if v, ok := lookup(env); ok && v != "" {
			if err := c.Set(key, v); err != nil {
				return fmt.Errorf("environment %s: %w", env, err)
			}
		}
	}
	return nil
}

// Set assigns one key by its YAML path, for environment and flag overrides.
func (c *Config) Set(key, value string) error {
	var err error
	switch key {
	case "catalog.uri":
		c.Catalog.URI = value
	case "catalog.name":
		c.Catalog.Name = value
	case "catalog.warehouse":
		c.Catalog.Warehouse = value
	case "catalog.index-catalog":
		c.Catalog.IndexCatalog = value
	case "catalog.index-location":
		c.Catalog.IndexLocation = value
	case "build.memory-budget":
		c.Build.MemoryBudget, err = ParseByteSize(value)
	case "build.target-file-size":
		c.Build.TargetFileSize, err = ParseByteSize(value)
	case "build.target-file-entries":
		c.Build.TargetFileEntries, err = strconv.ParseInt(value, 10, 64)
	case "build.row-group-rows":
		c.Build.RowGroupRows, err = strconv.Atoi(value)
	case "build.progress":
		c.Build.Progress = value
	case "run.poll-interval":
		err = setDuration(&c.Run.PollInterval, value)
	case "run.policy":
		c.Run.Policy = value
	case "run.adaptive.max-snapshots-behind":
		c.Run.Adaptive.MaxSnapshotsBehind, err = strconv.Atoi(value)
	case "run.adaptive.max-lag":
		err = setDuration(&c.Run.Adaptive.MaxLag, value)
	case "run.http":
		c.Run.HTTP = value
	case "run.stage-dir":
		c.Run.StageDir = value
	case "run.kafka.brokers":
		c.Run.Kafka.Brokers = strings.Split(value, ",")
	case "run.kafka.commit-topic":
		c.Run.Kafka.CommitTopic = value
	case "run.kafka.notification-timeout":
		err = setDuration(&c.Run.Kafka.NotificationTimeout, value)
	case "run.kafka.catch-up-timeout":
		err = setDuration(&c.Run.Kafka.CatchUpTimeout, value)
	case "run.kafka.metadata-max-age":
		err = setDuration(&c.Run.Kafka.MetadataMaxAge, value)
	case "run.kafka.tls.enabled":
		c.Run.Kafka.TLS.Enabled, err = strconv.ParseBool(value)
	case "run.kafka.tls.ca-file":
		c.Run.Kafka.TLS.CAFile = value
	case "run.kafka.tls.cert-file":
		c.Run.Kafka.TLS.CertFile = value
	case "run.kafka.tls.key-file":
		c.Run.Kafka.TLS.KeyFile = value
	case "run.kafka.tls.server-name":
		c.Run.Kafka.TLS.ServerName = value
	case "run.kafka.sasl.mechanism":
		c.Run.Kafka.SASL.Mechanism = value
	case "run.kafka.sasl.username":
		c.Run.Kafka.SASL.Username = value
	case "run.kafka.sasl.password":
		c.Run.Kafka.SASL.Password = value
	case "run.kafka.commit-format":
		c.Run.Kafka.CommitFormat = value
	case "run.kafka.change-topics":
		c.Run.Kafka.ChangeTopics = strings.Split(value, ",")
	case "run.kafka.debezium-decimal-handling":
		c.Run.Kafka.DebeziumDecimalHandling = value
	case "run.kafka.embedded-broker":
		c.Run.Kafka.EmbeddedBroker = value
	case "run.max-parallel-updates":
		c.Run.MaxParallelUpdates, err = strconv.Atoi(value)
	case "run.long-update-after":
		err = setDuration(&c.Run.LongUpdateAfter, value)
	case "run.rewrite-deletes.enabled":
		c.Run.RewriteDeletes.Enabled, err = strconv.ParseBool(value)
	case "run.rewrite-deletes.min-files":
		c.Run.RewriteDeletes.MinFiles, err = strconv.Atoi(value)
	case "serve.http":
		c.Serve.HTTP = value
	case "serve.token":
		c.Serve.Token = value
	case "serve.max-concurrent-requests":
		c.Serve.MaxConcurrentRequests, err = strconv.Atoi(value)
	case "serve.max-queue-wait":
		err = setDuration(&c.Serve.MaxQueueWait, value)
	case "serve.warm":
		c.Serve.Warm, err = strconv.ParseBool(value)
	case "serve.tls-cert-file":
		c.Serve.TLSCertFile = value
	case "serve.tls-key-file":
		c.Serve.TLSKeyFile = value
	case "serve.cache-bytes":
		c.Serve.CacheBytes, err = ParseByteSize(value)
	case "serve.max-predicate-bytes":
		c.Serve.MaxPredicateBytes, err = ParseByteSize(value)
	case "serve.max-rows":
		c.Serve.MaxRows, err = strconv.ParseInt(value, 10, 64)
	case "serve.metadata-max-age":
		err = setDuration(&c.Serve.MetadataMaxAge, value)
	case "serve.timeout":
		err = setDuration(&c.Serve.Timeout, value)
	case "log.level":
		c.Log.Level = value
	case "log.format":
		c.Log.Format = value
	default:
		prop, ok := strings.CutPrefix(key, "catalog.properties.")
		if !ok || prop == "" {
			return fmt.Errorf("unknown config key %q", key)
		}
		if c.Catalog.Properties == nil {
			c.Catalog.Properties = map[string]string{}
		}
		c.Catalog.Properties[prop] = value
	}
	if err != nil {
		return fmt.Errorf("config key %s: %w", key, err)
	}
	return nil
}

// EnsureDefaults fills what is still empty after file, environment and
// flags: the embedded default's paths are made absolute against the working
// directory, so every process that shares them agrees.
func (c *Config) EnsureDefaults() error {
	if c.Catalog.URI == "" || c.Catalog.Warehouse == "" {
		dir, err := filepath.Abs(DefaultDataDir)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", DefaultDataDir, err)
		}
		if c.Catalog.URI == "" {
			c.Catalog.URI = SQLiteURI(filepath.Join(dir, "catalog.db"))
		}
		if c.Catalog.Warehouse == "" {
			c.Catalog.Warehouse = format.FileURI(filepath.Join(dir, "warehouse"))
		}
	}
	if wh := c.Catalog.Warehouse; wh != "" && !format.HasScheme(wh) && c.CatalogKind() != "rest" {
		// A local path: the table spec reads a location without a scheme
		// as relative, iceberg-go parses it as a URI ("#" starts a
		// fragment), and a path relative to the working directory names
		// another place for a process started elsewhere; new tables get the
		// file:// URI of the absolute directory. A REST catalog's warehouse
		// is the server's to interpret (often a catalog's name) and is sent
		// as it is.
		var err error
		if c.Catalog.Warehouse, err = absoluteFileURI("warehouse", wh); err != nil {
			return err
		}
	}
	if loc := c.Catalog.IndexLocation; loc != "" && !format.HasScheme(loc) {
		var err error
		if c.Catalog.IndexLocation, err = absoluteFileURI("index location", loc); err != nil {
			return err
		}
	}
	if c.Catalog.Name == "" {
		c.Catalog.Name = "default"
	}
	if c.Run.StageDir == "" {
		dir, err := c.defaultStageDir()
		if err != nil {
			return err
		}
		c.Run.StageDir = dir
	}
	if c.Catalog.IndexCatalog == "" {
		if c.CatalogKind() == "rest" {
			c.Catalog.IndexCatalog = "fs"
		} else {
			c.Catalog.IndexCatalog = "sql"
		}
	}
	return nil
}

// defaultStageDir puts the staging store beside the configured data, as
// the embedded default lays it out (catalog.db, warehouse/, staging/): next
// to a SQLite catalog, else next to a local warehouse, else in
// ./streamidx-data. A daemon started from another directory then finds
// the same staging store.
func (c *Config) defaultStageDir() (string, error) {
	if c.CatalogKind() == "sqlite" {
		if p, err := c.SQLitePath(); err == nil {
			return filepath.Join(filepath.Dir(p), "staging"), nil
		}
	}
	wh := c.Catalog.Warehouse
	if u, err := url.Parse(wh); err == nil && u.Scheme == "file" {
		wh = u.Path
	}
	if filepath.IsAbs(wh) {
		return filepath.Join(filepath.Dir(filepath.Clean(wh)), "staging"), nil
	}
	return filepath.Abs(filepath.Join(DefaultDataDir, "staging"))
}

// IndexRoot is where the fs index catalog keeps indexes: the index
// location, or else the warehouse.
func (c *Config) IndexRoot() string {
	if c.Catalog.IndexLocation != "" {
		return c.Catalog.IndexLocation
	}
	return c.Catalog.Warehouse
}

// CatalogKind is sqlite, postgres or rest, from the catalog URI's scheme.
func (c *Config) CatalogKind() string {
	switch u := strings.ToLower(c.Catalog.URI); {
	case strings.HasPrefix(u, "sqlite:"):
		return "sqlite"
	case strings.HasPrefix(u, "postgres:"), strings.HasPrefix(u, "postgresql:"):
		return "postgres"
	case strings.HasPrefix(u, "http:"), strings.HasPrefix(u, "https:"):
		return "rest"
	}
	return ""
}

// ParseTable splits NS.TABLE (namespaces may have several levels:
// a.b.table) into the parts of an Iceberg table identifier.
func ParseTable(s string) ([]string, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("table %q: want NAMESPACE.TABLE", s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("table %q: empty name part", s)
		}
	}
	return parts, nil
}

// IOProperties are the properties handed to iceberg-go's catalog and file
// IO: catalog.properties plus the warehouse.
func (c *Config) IOProperties() map[string]string {
	props := map[string]string{}
	for k, v := range c.Catalog.Properties {
		props[k] = v
	}
	props["warehouse"] = c.Catalog.Warehouse
	return props
}

// absoluteFileURI is the file:// URI of the local path p, made absolute
// against the working directory; what names the setting in an error.
func absoluteFileURI(what, p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve %s %s: %w", what, p, err)
	}
	return format.FileURI(abs), nil
}

// SQLiteURI is the catalog URI of the SQLite database at the local absolute
// path dbPath, percent-encoded as SQLitePath expects.
func SQLiteURI(dbPath string) string {
	return (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(dbPath)}).String()
}

// SQLitePath is the database file of a sqlite:///abs/path.db URI.
func (c *Config) SQLitePath() (string, error) {
	u, err := url.Parse(c.Catalog.URI)
	if err != nil {
		return "", fmt.Errorf("catalog uri: %w", err)
	}
	p := u.Path
	if u.Host != "" { // sqlite://relative/path.db
		p = u.Host + u.Path
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("catalog uri %q: sqlite needs an absolute path (sqlite:///abs/path.db)", c.Catalog.URI)
	}
	return p, nil
}

// Validate reports every invalid setting.
func (c *Config) Validate() error {
	var errs []error
	if c.CatalogKind() == "" {
		errs = append(errs, fmt.Errorf("catalog.uri %q: want sqlite:///abs/path.db, postgres://... or http(s)://...", c.Catalog.URI))
	}
	if c.CatalogKind() == "sqlite" {
		if _, err := c.SQLitePath(); err != nil {
			errs = append(errs, err)
		}
	}
	switch c.Catalog.IndexCatalog {
	case "sql", "fs":
		if c.Catalog.IndexCatalog == "sql" && c.CatalogKind() == "rest" {
			errs = append(errs, errors.New("catalog.index-catalog sql needs a SQL catalog; use fs with a REST catalog"))
		}
		if root := c.IndexRoot(); c.Catalog.IndexCatalog == "fs" && !format.HasScheme(root) && !filepath.IsAbs(root) {
			errs = append(errs, fmt.Errorf("catalog.index-location: the fs index catalog needs a location, and the warehouse %q is none (a REST catalog's name, say); set catalog.index-location (STREAMIDX_INDEX_LOCATION) to a URI such as s3://bucket/indexes", root))
		}
	default:
		errs = append(errs, fmt.Errorf("catalog.index-catalog %q: want sql or fs", c.Catalog.IndexCatalog))
	}
	if c.Build.MemoryBudget < 16<<20 {
		errs = append(errs, fmt.Errorf("build.memory-budget %s: want at least 16MiB", c.Build.MemoryBudget))
	}
	if c.Build.TargetFileSize < 1 {
		errs = append(errs, fmt.Errorf("build.target-file-size %s: want a positive size", c.Build.TargetFileSize))
	}
	if c.Build.TargetFileEntries < 1 {
		errs = append(errs, fmt.Errorf("build.target-file-entries %d: want a positive number", c.Build.TargetFileEntries))
	}
	if c.Build.RowGroupRows < 1 {
		errs = append(errs, fmt.Errorf("build.row-group-rows %d: want a positive number", c.Build.RowGroupRows))
	}
	switch c.Build.Progress {
	case "auto", "always", "never":
	default:
		errs = append(errs, fmt.Errorf("build.progress %q: want auto, always or never", c.Build.Progress))
	}
	switch c.Run.Policy {
	case "every", "latest", "adaptive":
	default:
		errs = append(errs, fmt.Errorf("run.policy %q: want every, latest or adaptive", c.Run.Policy))
	}
	if c.Run.Adaptive.MaxSnapshotsBehind < 1 {
		errs = append(errs, fmt.Errorf("run.adaptive.max-snapshots-behind %d: want at least 1", c.Run.Adaptive.MaxSnapshotsBehind))
	}
	if c.Run.Adaptive.MaxLag <= 0 {
		errs = append(errs, fmt.Errorf("run.adaptive.max-lag %s: want a positive duration", time.Duration(c.Run.Adaptive.MaxLag)))
	}
	if c.Run.RewriteDeletes.MinFiles < 1 {
		errs = append(errs, fmt.Errorf("run.rewrite-deletes.min-files %d: want at least 1", c.Run.RewriteDeletes.MinFiles))
	}
	if c.Run.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("run.poll-interval %s: want a positive duration", time.Duration(c.Run.PollInterval)))
	}
	if c.Run.Kafka.NotificationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("run.kafka.notification-timeout %s: want a positive duration", time.Duration(c.Run.Kafka.NotificationTimeout)))
	}
	if c.Run.Kafka.CatchUpTimeout <= 0 {
		errs = append(errs, fmt.Errorf("run.kafka.catch-up-timeout %s: want a positive duration", time.Duration(c.Run.Kafka.CatchUpTimeout)))
	}
	if c.Run.Kafka.MetadataMaxAge <= 0 || c.Run.Kafka.MetadataMaxAge > Duration(time.Hour) {
		errs = append(errs, fmt.Errorf("run.kafka.metadata-max-age %s: want a positive duration of at most 1h", time.Duration(c.Run.Kafka.MetadataMaxAge)))
	}
	if c.Run.RetainSnapshots < 1 {
		errs = append(errs, fmt.Errorf("run.retain-snapshots %d: want at least 1 (the current snapshot is always kept)", c.Run.RetainSnapshots))
	}
	if c.Run.LongUpdateAfter < 0 {
		errs = append(errs, fmt.Errorf("run.long-update-after %s: want 0 (updates never pause) or a positive duration", time.Duration(c.Run.LongUpdateAfter)))
	}
	if c.Run.MaxSnapshotAge < 0 {
		errs = append(errs, fmt.Errorf("run.max-snapshot-age %s: want 0 (no age limit) or a positive duration", time.Duration(c.Run.MaxSnapshotAge)))
	}
	switch c.Run.Kafka.CommitFormat {
	case "native", "kafka-connect":
	default:
		errs = append(errs, fmt.Errorf("run.kafka.commit-format %q: want native or kafka-connect", c.Run.Kafka.CommitFormat))
	}
	switch c.Run.Kafka.DebeziumDecimalHandling {
	case "precise", "string", "double":
	default:
		errs = append(errs, fmt.Errorf("run.kafka.debezium-decimal-handling %q: want precise, string or double", c.Run.Kafka.DebeziumDecimalHandling))
	}
	if _, err := c.Run.Kafka.ParseChangeTopics(); err != nil {
		errs = append(errs, err)
	}
	if c.Run.MaxParallelUpdates < 1 {
		errs = append(errs, fmt.Errorf("run.max-parallel-updates %d: want at least 1", c.Run.MaxParallelUpdates))
	}
	for i, r := range c.Run.Indexes {
		if r.Table == "" || r.Index == "" {
			errs = append(errs, fmt.Errorf("run.indexes[%d]: table and index are required", i))
		} else if _, err := ParseTable(r.Table); err != nil {
			errs = append(errs, fmt.Errorf("run.indexes[%d]: %w", i, err))
		}
	}
	if k := c.Run.Kafka.TLS; (k.CertFile == "") != (k.KeyFile == "") {
		errs = append(errs, errors.New("run.kafka.tls.cert-file and run.kafka.tls.key-file: give both or neither"))
	}
	switch sasl := c.Run.Kafka.SASL; sasl.Mechanism {
	case "":
		if sasl.Username != "" || sasl.Password != "" {
			errs = append(errs, errors.New("run.kafka.sasl: a username or password without a mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"))
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if sasl.Username == "" || sasl.Password == "" {
			errs = append(errs, fmt.Errorf("run.kafka.sasl.mechanism %s: want a username and a password", sasl.Mechanism))
		}
	default:
		errs = append(errs, fmt.Errorf("run.kafka.sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", sasl.Mechanism))
	}
	if c.Serve.MaxConcurrentRequests < 1 {
		errs = append(errs, fmt.Errorf("serve.max-concurrent-requests %d: want at least 1", c.Serve.MaxConcurrentRequests))
	}
	if c.Serve.MaxQueueWait <= 0 {
		errs = append(errs, fmt.Errorf("serve.max-queue-wait %s: want a positive duration", time.Duration(c.Serve.MaxQueueWait)))
	}
	if (c.Serve.TLSCertFile == "") != (c.Serve.TLSKeyFile == "") {
		errs = append(errs, errors.New("serve.tls-cert-file and serve.tls-key-file: give both or neither"))
	}
	if c.Serve.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("serve.cache-bytes %s: want 0 (no footer cache) or a positive size", c.Serve.CacheBytes))
	}
	if c.Serve.MaxPredicateBytes < 1 {
		errs = append(errs, fmt.Errorf("serve.max-predicate-bytes %s: want a positive size", c.Serve.MaxPredicateBytes))
	}
	if c.Serve.MaxRows < 1 {
		errs = append(errs, fmt.Errorf("serve.max-rows %d: want at least 1", c.Serve.MaxRows))
	}
	if c.Serve.MetadataMaxAge <= 0 {
		errs = append(errs, fmt.Errorf("serve.metadata-max-age %s: want a positive duration", time.Duration(c.Serve.MetadataMaxAge)))
	}
	if c.Serve.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("serve.timeout %s: want a positive duration", time.Duration(c.Serve.Timeout)))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format %q: want text or json", c.Log.Format))
	}
	return errors.Join(errs...)
}

// setDuration sets *dst to the duration value spells.
func setDuration(dst *Duration, value string) error {
	d, err := time.ParseDuration(value)
	if err == nil {
		*dst = Duration(d)
	}
	return err
}

// secretProperty reports whether a catalog property holds a secret: a
// REST catalog's token or OAuth2 credential, a store's secret key, session
// token or password.
func secretProperty(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"token", "credential", "secret", "password"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// String prints the effective configuration as YAML.
func (c Config) String() string {
	// Secrets are never printed.
	if c.Serve.Token != "" {
		c.Serve.Token = "<redacted>"
	}
	if len(c.Catalog.Properties) > 0 {
		props := make(map[string]string, len(c.Catalog.Properties)) // c's map is the caller's
		for k, v := range c.Catalog.Properties {
			if secretProperty(k) {
				v = "<redacted>"
			}
			props[k] = v
		}
		c.Catalog.Properties = props
	}
	if c.Run.Kafka.SASL.Password != "" {
		c.Run.Kafka.SASL.Password = "<redacted>"
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// ByteSize is a size in bytes written as 512MiB, 64KiB, 1GB or a plain number.
type ByteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseByteSize reads a size such as 128MiB.
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return ByteSize(f * float64(mult)), nil
}

func (b ByteSize) String() string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return strconv.FormatInt(int64(b), 10)
}

// UnmarshalYAML accepts a number or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes the size with a unit.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// Duration is a time.Duration written as 30s, 5m.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("duration %q: %w", n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
