package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/internal/config"
)

func init() {
	register(command{name: "run", summary: "the daemon: keep indexes aligned with their tables as commits arrive", run: runDaemon})
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runDaemon(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	var tables, indexes stringList
	fs.Var(&tables, "table", "source table `NS.TABLE` (repeat, paired with --index)")
	fs.Var(&indexes, "index", "index `name` (repeat, paired with --table)")
	poll := fs.Duration("poll-interval", 0, "catalog poll `interval` (default from config: 10s)")
	brokers := fs.String("kafka-brokers", "", "Kafka bootstrap `servers` host:port,... for commit notifications (default: none, poll only)")
	commitTopic := fs.String("commit-topic", "", "commit notification `topic` (default streamidx-commits)")
	httpAddr := fs.String("http", "", "listen `address` of /metrics, /healthz, /readyz, or none (default 127.0.0.1:9464)")
	policy := fs.String("policy", "", "alignment `policy`: every, latest or adaptive (default every)")
	stageDir := fs.String("stage-dir", "", "staging store `directory` (default: staging/ beside the SQLite catalog or the local warehouse)")
	var changeTopics stringList
	fs.Var(&changeTopics, "change-topic", "change `topic` (Debezium or native JSON events) feeding the source: events indexes; TOPIC=NS.TABLE binds it to a table (repeat)")
	commitFormat := fs.String("commit-format", "", "commit topic `format`: native or kafka-connect (the Iceberg Kafka Connect sink's control topic) (default native)")
	embedded := fs.String("embedded-kafka", "", "start an in-process Kafka broker (kfake) on `host:port` and use it as the brokers; its topics are kept beside the staging directory")
	once := fs.Bool("once", false, "align every index once and exit (no Kafka, no HTTP): for cron jobs and measurements")
	rewriteDeletes := fs.Bool("rewrite-deletes", false, "after publishing, turn the table's equality deletes into deletion vectors through an index with _file and _pos (run.rewrite-deletes.enabled)")
	serveFlag := fs.Bool("serve", false, "answer lookups over HTTP on the --http listener too (see streamidx serve and the serve config section)")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	g.serving = *serveFlag
	if len(tables) != len(indexes) {
		return exitError, fmt.Errorf("--table and --index come in pairs: got %d tables and %d indexes", len(tables), len(indexes))
	}
	e, err := openEnv(ctx, g)
	if err != nil {
		return exitError, err
	}
	defer e.Close()
	cfg := e.cfg
	for i := range tables {
		cfg.Run.Indexes = append(cfg.Run.Indexes, config.IndexRef{Table: tables[i], Index: indexes[i]})
	}
	for key, v := range map[string]string{"run.kafka.brokers": *brokers, "run.kafka.commit-topic": *commitTopic,
		"run.http": *httpAddr, "run.policy": *policy, "run.stage-dir": *stageDir, "run.kafka.commit-format": *commitFormat,
		"run.kafka.change-topics": changeTopics.String(), "run.kafka.embedded-broker": *embedded} {
		if v != "" {
			if err := cfg.Set(key, v); err != nil {
				return exitError, err
			}
		}
	}
	// Given, the flag wins whatever its value: 0 or a negative interval
	// is refused by the configuration's validation, never read as "unset".
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "poll-interval" {
			cfg.Run.PollInterval = config.Duration(*poll)
		}
	})
	if err := cfg.Validate(); err != nil {
		return exitError, fmt.Errorf("invalid configuration: %w", err)
	}
	if *rewriteDeletes {
		cfg.Run.RewriteDeletes.Enabled = true
	}
	// An update holds what a build does (a rebuild is one); a service adds
	// its cache.
	memory := int64(cfg.Build.MemoryBudget)
	if *serveFlag {
		memory += int64(cfg.Serve.CacheBytes)
	}
	limitMemory(memory)
	if *once {
		cfg.Run.HTTP, cfg.Run.Kafka.Brokers = "", nil
	}
	if addr := cfg.Run.Kafka.EmbeddedBroker; addr != "" && !*once {
		broker, err := startEmbeddedBroker(addr, cfg.Run.StageDir)
		if err != nil {
			return exitError, err
		}
		defer broker.Close()
		cfg.Run.Kafka.Brokers = broker.ListenAddrs()
		// The embedded broker speaks plain Kafka on its own address.
		if cfg.Run.Kafka.TLS.On() || cfg.Run.Kafka.SASL.Mechanism != "" {
			e.log.Warn("run.kafka.tls and run.kafka.sasl do not apply to the embedded broker: connecting to it without them")
			cfg.Run.Kafka.TLS, cfg.Run.Kafka.SASL = config.KafkaTLSConfig{}, config.KafkaSASLConfig{}
		}
		e.log.Info("embedded Kafka broker started", "addr", addr)
	}
	if *serveFlag && !*once {
		reserveForServing(e.log)
	}
	reg := newRegistry()
	d, err := daemon.New(e.cat, e.indexes, e.store, cfg, e.log, reg)
	if err != nil {
		return exitError, err
	}
	defer d.Close()
	if *serveFlag && !*once {
		if cfg.Run.HTTP == "" || cfg.Run.HTTP == "none" {
			return exitError, errors.New("--serve answers on the --http listener, which is off")
		}
		svc, err := newService(e, reg)
		if err != nil {
			return exitError, err
		}
		defer svc.Close()
		d.Mount("/v1/", svc.Handler())
		if cfg.Serve.Warm {
			budget := svc.WarmBudget(d.NumIndexes())
			d.WarmWith(func(ctx context.Context, table, index string) error {
				return warmIndex(ctx, e, svc, table, index, budget)
			})
		}
		warnIfExposed(e, cfg.Run.HTTP)
	}
	if *once {
		res, err := d.RunOnce(ctx)
		for _, r := range res {
			fmt.Fprintf(stdout, "%s/%s: %d index snapshots published in %s\n", r.Table, r.Index, r.Published, r.Took.Round(time.Millisecond))
		}
		if err != nil {
			return exitError, err
		}
		return exitOK, nil
	}
	if err := d.Run(ctx); err != nil {
		return exitError, err
	}
	fmt.Fprintln(stdout, "streamidx run: stopped")
	return exitOK, nil
}
