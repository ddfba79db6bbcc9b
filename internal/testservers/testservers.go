// Package testservers hands tests the real servers that `make itest`
// starts (scripts/itest-stack.sh): a PostgreSQL database and an S3 object
// store (SeaweedFS), named by environment variables. Built with the itest
// tag (as make itest builds the tests), a test that asks for a server
// fails when the variable is unset, so a misconfigured run never passes by
// leaving the servers out; without the tag such a test leaves the server
// out and says so in its log.
package testservers

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The variables scripts/itest-stack.sh writes.
const (
	PostgresDSNEnv = "STREAMIDX_TEST_POSTGRES_DSN" // postgres://user@host:port/db?sslmode=disable
	S3EndpointEnv  = "STREAMIDX_TEST_S3_ENDPOINT"  // http://127.0.0.1:port
	S3BucketEnv    = "STREAMIDX_TEST_S3_BUCKET"    // an existing bucket
)

// Postgres returns the DSN of the test database, or "" (logged) when none
// is configured outside an itest build.
func Postgres(t testing.TB) string {
	t.Helper()
	return lookup(t, PostgresDSNEnv)
}

// S3 is a prefix of its own in the test bucket of the S3 server.
type S3 struct {
	// Root is s3://bucket/<unique prefix>: nothing else writes below it.
	Root string
	// Props are the iceberg-go IO properties that reach the server.
	Props map[string]string
}

// NewS3 returns a fresh prefix on the test S3 server, or ok false (logged)
// when none is configured outside an itest build.
func NewS3(t testing.TB) (s S3, ok bool) {
	t.Helper()
	endpoint := lookup(t, S3EndpointEnv)
	bucket := lookup(t, S3BucketEnv)
	if endpoint == "" || bucket == "" {
		return S3{}, false
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return S3{
		Root:  fmt.Sprintf("s3://%s/%s-%s", bucket, name, uuid.NewString()[:8]),
		Props: S3Props(endpoint),
	}, true
}

// The credentials of the test S3 servers: SeaweedFS without identities
// takes any, MinIO is started with these.
const (
	S3AccessKey = "streamidx"
	S3SecretKey = "streamidx-secret"
)

// S3Props are the iceberg-go IO properties for the S3 server at endpoint.
func S3Props(endpoint string) map[string]string {
	return map[string]string{
		"s3.endpoint":          endpoint,
		"s3.region":            "us-east-1",
		"s3.path-style-access": "true",
		"s3.access-key-id":     S3AccessKey,
		"s3.secret-access-key": S3SecretKey,
	}
}

func lookup(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if Required {
			t.Fatalf("%s is not set: run the itest tests through `make itest`, which starts the servers", name)
		}
		t.Logf("%s not set: this server is left out (make itest starts it)", name)
	}
	return v
}
