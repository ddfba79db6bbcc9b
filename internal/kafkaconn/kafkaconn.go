// Package kafkaconn reaches the Kafka brokers of streamidx's configuration
// (run.kafka: the addresses, TLS and SASL) for every client that streamidx
// makes: the daemon's commit-topic group and change feed, and notify.
package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamidx/streamidx/internal/config"
)

// Options returns the options that reach the brokers of k: their
// addresses, TLS (run.kafka.tls) and SASL (run.kafka.sasl), and the
// client's own warnings and errors (a refused authentication, a broker
// that does not answer) in log. Files that do not load are named in the
// error.
func Options(k config.KafkaConfig, log *slog.Logger) ([]kgo.Opt, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.WithLogger(kafkaLog{log})}
	if k.TLS.On() {
		tc, err := kafkaTLS(k.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := kafkaSASL(k.SASL); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func kafkaTLS(t config.KafkaTLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		data, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("run.kafka.tls.ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("run.kafka.tls.ca-file %s: no PEM certificate in it", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, errors.New("run.kafka.tls.cert-file and run.kafka.tls.key-file: give both or neither")
		}
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("run.kafka.tls client certificate %s and key %s: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// kafkaSASL returns the mechanism of s, nil for none (the configuration's
// validation has refused unknown mechanisms).
func kafkaSASL(s config.KafkaSASLConfig) sasl.Mechanism {
	switch s.Mechanism {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// kafkaLog passes the Kafka client's warnings and errors to the daemon's
// log; its informational messages (every connection, every rebalance step)
// stay out.
type kafkaLog struct{ log *slog.Logger }

func (kafkaLog) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kafkaLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka client: "+msg, keyvals...)
}

// CheckBrokers asks the brokers for an answer until one gives it, and
// logs each failure (a password refused, a certificate not trusted, no
// broker listening): the Kafka client retries such failures on its own
// without saying why nothing arrives.
func CheckBrokers(ctx context.Context, cl *kgo.Client, log *slog.Logger, client string) {
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if attempt > 1 {
				log.Info("the Kafka brokers answer", "client", client)
			}
			return
		}
		delay := min(100*time.Millisecond<<min(attempt-1, 9), 30*time.Second)
		log.Warn("the Kafka brokers do not answer: check run.kafka.brokers, run.kafka.tls and run.kafka.sasl; retrying",
			"client", client, "err", err, "retry_in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}
