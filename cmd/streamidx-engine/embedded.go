package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamidx/streamidx/daemon"
	"github.com/streamidx/streamidx/internal/config"
)

// startEmbeddedBroker starts franz-go's in-process Kafka-protocol broker on
// addr (host:port), the embedded default of the design: any Kafka client
// (kcat, franz-go) can produce to it and consume from it. Topics it creates
// on first use have one partition. They are kept in the directory kafka
// beside the staging directory, so a restart finds them.
func startEmbeddedBroker(addr, stageDir string) (*kfake.Cluster, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka %q: want host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("embedded kafka %q: want a port from 1 to 65535", addr)
	}
	cluster, err := kfake.NewCluster(
		kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, portStr))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(1), // one partition: records written by hand keep their order
		kfake.DataDir(filepath.Join(filepath.Dir(filepath.Clean(stageDir)), "kafka")),
	)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka on %s: %w", addr, err)
	}
	return cluster, nil
}

// runDaemonInProcess runs the daemon in this process on e's catalogs and store,
// with a registry of its own. stop closes it and returns what its run
// ended with; later calls do nothing.
func runDaemonInProcess(ctx context.Context, e *env, cfg config.Config, log *slog.Logger) (*daemon.Daemon, *prometheus.Registry, func() error, error) {
	reg := prometheus.NewRegistry()
	d, err := daemon.New(e.cat, e.indexes, e.store, cfg, log, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(context.WithoutCancel(ctx)) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		if err := d.Close(); err != nil {
			return err
		}
		return <-runErr
	}
	return d, reg, stop, nil
}
