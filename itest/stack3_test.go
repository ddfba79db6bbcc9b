//go:build itest

package itest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/streamidx/streamidx/internal/testservers"
)

// The images of stack 3, the same as docker-compose.yml's.
const (
	kafkaImage = "apache/kafka:3.9.0"
	minioImage = "minio/minio:RELEASE.2025-03-12T18-04-18Z"
	restImage  = "apache/iceberg-rest-fixture:1.8.1"
)

// TestStack3UsesTheComposeImages: stack 3 tests the images that
// docker-compose.yml deploys (it needs no Docker engine).
func TestStack3UsesTheComposeImages(t *testing.T) {
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range []string{kafkaImage, minioImage, restImage} {
		if !strings.Contains(string(compose), "image: "+image+"\n") {
			t.Errorf("docker-compose.yml does not deploy %s", image)
		}
	}
}

const (
	minioUser     = testservers.S3AccessKey
	minioPassword = testservers.S3SecretKey
	minioBucket   = "warehouse"
)

// TestScenariosContainers is stack 3: the official Kafka image in KRaft
// mode, MinIO as the S3 store, and the Iceberg REST catalog fixture (with
// the fs index catalog on MinIO, streamidx's default beside a REST
// catalog), started through testcontainers-go. Without a Docker engine it
// skips.
func TestScenariosContainers(t *testing.T) {
	testcontainers.SkipIfProviderIsNotHealthy(t)
	ctx := context.Background()
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })

	minio, err := testcontainers.Run(ctx, minioImage,
		network.WithNetwork([]string{"minio"}, nw),
		testcontainers.WithEnv(map[string]string{"MINIO_ROOT_USER": minioUser, "MINIO_ROOT_PASSWORD": minioPassword}),
		testcontainers.WithCmd("server", "/data"),
		testcontainers.WithExposedPorts("9000/tcp"),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/minio/health/live").WithPort("9000/tcp")),
	)
	testcontainers.CleanupContainer(t, minio)
	if err != nil {
		t.Fatal(err)
	}
	s3Endpoint, err := minio.PortEndpoint(ctx, "9000/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}
	createBucket(t, s3Endpoint, minioBucket)

	rest, err := testcontainers.Run(ctx, restImage,
		network.WithNetwork([]string{"rest"}, nw),
		testcontainers.WithEnv(map[string]string{
			"CATALOG_WAREHOUSE":              fmt.Sprintf("s3://%s/", minioBucket),
			"CATALOG_IO__IMPL":               "org.apache.iceberg.aws.s3.S3FileIO",
			"CATALOG_S3_ENDPOINT":            "http://minio:9000",
			"CATALOG_S3_PATH__STYLE__ACCESS": "true",
			"AWS_ACCESS_KEY_ID":              minioUser,
			"AWS_SECRET_ACCESS_KEY":          minioPassword,
			"AWS_REGION":                     "us-east-1",
		}),
		testcontainers.WithExposedPorts("8181/tcp"),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/v1/config").WithPort("8181/tcp")),
	)
	testcontainers.CleanupContainer(t, rest)
	if err != nil {
		t.Fatal(err)
	}
	restURI, err := rest.PortEndpoint(ctx, "8181/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}

	brokers := startKafka(t, nw)
	stack := func(t *testing.T) Parts {
		return Parts{
			Kafka:      brokers,
			CatalogURI: restURI,
			Warehouse:  fmt.Sprintf("s3://%s/streamidx-%s", minioBucket, uuid.NewString()[:8]),
			IOProps:    testservers.S3Props(s3Endpoint),
		}
	}
	RunAll(t, stack, Options{Crashes: 3})
}

// startKafka starts a one-node KRaft cluster and returns its bootstrap
// address on this host. The broker must advertise the port Docker mapped,
// which is known only once the container runs, so the container waits for
// a start script that names it.
func startKafka(t *testing.T, nw *testcontainers.DockerNetwork) []string {
	t.Helper()
	ctx := context.Background()
	const script = "/tmp/streamidx-kafka-start.sh"
	ctr, err := testcontainers.Run(ctx, kafkaImage,
		network.WithNetwork([]string{"kafka"}, nw),
		testcontainers.WithEnv(map[string]string{
			"KAFKA_NODE_ID":                                  "1",
			"KAFKA_PROCESS_ROLES":                            "broker,controller",
			"KAFKA_LISTENERS":                                "HOST://0.0.0.0:9093,BROKER://0.0.0.0:9092,CONTROLLER://0.0.0.0:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":           "HOST:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":               "BROKER",
			"KAFKA_CONTROLLER_LISTENER_NAMES":                "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                 "1@localhost:9094",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":         "0",
			"KAFKA_NUM_PARTITIONS":                           "2",
		}),
		testcontainers.WithExposedPorts("9093/tcp"),
		testcontainers.WithEntrypoint("sh"),
		testcontainers.WithCmd("-c", "while [ ! -f "+script+" ]; do sleep 0.1; done; exec sh "+script),
		testcontainers.WithLifecycleHooks(testcontainers.ContainerLifecycleHooks{
			PostStarts: []testcontainers.ContainerHook{func(ctx context.Context, c testcontainers.Container) error {
				if err := wait.ForMappedPort("9093/tcp").WaitUntilReady(ctx, c); err != nil {
					return err
				}
				endpoint, err := c.PortEndpoint(ctx, "9093/tcp", "")
				if err != nil {
					return err
				}
				start := fmt.Sprintf("export KAFKA_ADVERTISED_LISTENERS=HOST://%s,BROKER://kafka:9092\nexec /etc/kafka/docker/run\n", endpoint)
				if err := c.CopyToContainer(ctx, []byte(start), script, 0o755); err != nil {
					return err
				}
				return wait.ForLog("Kafka Server started").WithStartupTimeout(2*time.Minute).WaitUntilReady(ctx, c)
			}},
		}),
	)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := ctr.PortEndpoint(ctx, "9093/tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	return []string{endpoint}
}

// createBucket creates a bucket on the S3 server at endpoint.
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(minioUser, minioPassword, ""),
	})
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}
