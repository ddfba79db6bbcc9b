package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// echo-serve is the floor of the lookup service's latency on a machine: an
// HTTP server that answers every request with the same bytes, a real
// answer of the service kept in a file, and does nothing else. The service
// bench loads it with the same clients as the service, in the same run and
// beside the same daemon and writer, so that what the machine alone costs a
// lookup (the loopback network, the scheduler, the clients' own share of
// two cores) reads beside what the service adds to it.

func init() {
	register(command{name: "echo-serve", summary: "answer every HTTP request with the bytes of one file: the floor of the lookup service's latency (measurements)",
		run: runEchoServe})
}

func runEchoServe(ctx context.Context, g *globals, fs *flag.FlagSet, args []string, stdout io.Writer) (int, error) {
	addr := fs.String("http", "127.0.0.1:9466", "listen `address`")
	answer := fs.String("answer", "", "`file` whose bytes answer every request (required)")
	contentType := fs.String("content-type", "application/x-ndjson", "Content-Type of the answers")
	if err := parseFlags(fs, args); err != nil {
		return exitError, err
	}
	if *answer == "" {
		return exitError, errors.New("--answer is required")
	}
	body, err := os.ReadFile(*answer)
	if err != nil {
		return exitError, fmt.Errorf("read the answer: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return exitError, fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request is read whole, as the service reads its predicate.
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", *contentType)
		_, _ = w.Write(body)
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if err := serveUntilDone(ctx, srv, done); err != nil {
		return exitError, err
	}
	fmt.Fprintln(stdout, "streamidx echo-serve: stopped")
	return exitOK, nil
}
