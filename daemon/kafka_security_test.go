package daemon

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/testtls"
)

// securedHarness is a harness of pk whose broker speaks only TLS and
// SCRAM (secureCluster), and whose daemon trusts the broker's certificate
// and gives the user streamidx with password.
func securedHarness(t *testing.T, password string) *harness {
	t.Helper()
	h := newHarness(t, 0, "pk")
	pair := testtls.Write(t, t.TempDir(), 11)
	secureCluster(t, h, pair)
	h.cfg.Run.Kafka.TLS = config.KafkaTLSConfig{CAFile: pair.CertFile}
	h.cfg.Run.Kafka.SASL = config.KafkaSASLConfig{Mechanism: "SCRAM-SHA-512", Username: "streamidx", Password: password}
	return h
}

// secureCluster starts a kfake broker that speaks TLS with pair's
// certificate and accepts only the SCRAM-SHA-512 user streamidx/s3cret,
// serving the commit topic; the harness's producer reaches it so.
func secureCluster(t *testing.T, h *harness, pair testtls.Pair) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	h.cluster, err = kfake.NewCluster(kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, commitTopic),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "streamidx", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cluster.Close)
	h.producer, err = kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DialTLSConfig(&tls.Config{RootCAs: testtls.Pool(pair), MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "streamidx", Pass: "s3cret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.producer.Close)
	h.cfg.Run.Kafka.Brokers = h.cluster.ListenAddrs()
}

// TestKafkaOverTLSWithSASL: with run.kafka.tls and run.kafka.sasl the
// daemon reads commit notifications from brokers that require both, and
// commits its offsets there.
func TestKafkaOverTLSWithSASL(t *testing.T) {
	h := securedHarness(t, "s3cret")
	h.start(nil)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID)
	s1 := h.commit(50)
	h.notify(s1.SnapshotID, s1.SequenceNumber, 0)
	// The poll interval is an hour: only the notification moves the index.
	h.waitIndexed("pk", s1.SnapshotID)
	waitFor(t, "the notification's offset is committed", func() bool { return h.committed(0) == 1 })
	if strings.Contains(h.logs.String(), "s3cret") {
		t.Errorf("the SASL password is in the logs")
	}
}

// TestKafkaWrongPasswordIsSaid: a password the brokers refuse moves
// nothing, and the daemon's log says that authentication failed.
func TestKafkaWrongPasswordIsSaid(t *testing.T) {
	h := securedHarness(t, "wrong")
	h.start(nil)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID) // the first build needs no broker
	first := h.tbl.CurrentSnapshot().SnapshotID
	s1 := h.commit(50)
	h.notify(s1.SnapshotID, s1.SequenceNumber, 0)
	waitFor(t, "a log line that the brokers do not answer", func() bool {
		return strings.Contains(h.logs.String(), "the Kafka brokers do not answer")
	})
	time.Sleep(200 * time.Millisecond)
	if got := h.indexed("pk"); got != first {
		t.Errorf("pk moved to %d without an authenticated consumer", got)
	}
}

// TestKafkaTLSFilesThatDoNotLoadStopTheStart: a CA file that is not PEM
// fails New, naming the file.
func TestKafkaTLSFilesThatDoNotLoadStopTheStart(t *testing.T) {
	h := newHarness(t, 0, "pk")
	h.cfg.Run.Kafka.Brokers = []string{"127.0.0.1:1"}
	pair := testtls.Write(t, t.TempDir(), 13)
	h.cfg.Run.Kafka.TLS = config.KafkaTLSConfig{CAFile: pair.KeyFile} // a key, not a certificate
	if d, err := New(h.cat, h.indexes, nil, h.cfg, nil, nil); err == nil || !strings.Contains(err.Error(), pair.KeyFile) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("New with a CA file that holds no certificate: %v", err)
	}
}
