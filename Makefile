# streamidx — build, test and measure.
#
#   make test   the test suite (what CI runs); stack 1 of the itest scenarios
#   make itest  the itest scenarios and catalog tests on real servers
#               (Postgres, SeaweedFS S3; Docker containers where an engine answers)
#   make lint   gofmt + go vet
#   make fuzz   every fuzz target for FUZZTIME each (default 60s)
#   make build  the streamidx and streamidx-client binaries in bin/
#   make bench  the performance table (streamidx bench) into bench.json
#   make bench-go  the Go benchmarks of every package

GO        ?= go
FUZZTIME  ?= 60s
PKGS      ?= ./...
# package:target for every go test -fuzz target of the module.
FUZZ_TARGETS = ./format:FuzzParseMetadata ./format:FuzzDecodeKey ./format:FuzzReadTrackingFile \
	./ingest:FuzzDecodeDebezium ./ingest:FuzzDecodeNative ./ingest:FuzzDecodeControlEvent \
	./format:FuzzOpenRangeFile ./planner:FuzzParse ./planner:FuzzLiteralValue \
	./internal/tablemeta:FuzzParse ./compactor:FuzzMergeMatchesModel ./format:FuzzThriftCompact

.PHONY: all build test itest lint fuzz crosscheck clean demo bench bench-go compose-config connect-samples

all: lint test

# streamidx answers lookups of current indexes itself and hands every other
# command to streamidx-engine, which it finds beside itself.
build:
	$(GO) build -o bin/streamidx ./cmd/streamidx
	$(GO) build -o bin/streamidx-engine ./cmd/streamidx-engine
	$(GO) build -o bin/streamidx-client ./cmd/streamidx-client

test:
	$(GO) test -count=1 -timeout 15m $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags itest $(ITEST_PKGS)

# Packages with tests on the servers of stack 2 (and 3). Built with the
# itest tag, a test whose server is not configured fails instead of leaving
# it out. scripts/itest-stack.sh installs Postgres (apt-get) and builds
# SeaweedFS (cached in ~/.cache/streamidx) when missing, starts both on
# loopback, runs the tests and stops them. Stack 1 ran in make test already.
ITEST_PKGS = ./itest/ ./indexcatalog/ ./internal/objstore/
itest: build
	STREAMIDX_ITEST_BINARY=$(CURDIR)/bin/streamidx scripts/itest-stack.sh run \
		$(GO) test -tags itest -count=1 -timeout 30m -skip TestScenariosEmbedded $(ITEST_PKGS)

# docker-compose.yml must be a valid Compose file (needs no Docker engine).
compose-config:
	@command -v docker-compose >/dev/null || (apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null)
	docker-compose -f docker-compose.yml config -q

# Minimizing each new interesting input for Go's default 60 s would spend a
# whole FUZZTIME on one input of a decoder whose inputs are kilobytes.
FUZZMINIMIZE ?= 5s
fuzz:
	@for pt in $(FUZZ_TARGETS); do \
		pkg=$${pt%%:*}; t=$${pt#*:}; \
		echo "== $$pkg $$t ($(FUZZTIME))"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) || exit 1; \
	done

# The performance table: every figure of streamidx bench beside its
# baseline, on generated tables of BENCH_SCALE (small: 1M orders; medium:
# 10M), printed and written to bench.json; the tables are kept in
# streamidx-bench/ and reused by the next run. Small runs in about 10
# minutes on 2 cores: the freshness streams are cut to two scenarios of
# BENCH_STREAM each (the full set, 2 minutes each: BENCH_ONLY= BENCH_STREAM=2m).
BENCH_SCALE  ?= small
BENCH_STREAM ?= 30s
BENCH_ONLY   ?= build,incremental,lookup,service,daemon,scan,events,verify,freshness.tail-10000.every,freshness.uniform-10000.latest
bench: build
	./bin/streamidx bench --scale $(BENCH_SCALE) --only '$(BENCH_ONLY)' --duration $(BENCH_STREAM) --drain 30s \
		--dir streamidx-bench --json bench.json; code=$$?; [ $$code -le 1 ] # exit 1: a goal is not met

# Go benchmarks of every package. STREAMIDX_BENCH_ROWS sets the table size
# of the lookup and merge benchmarks (default small).
BENCHTIME ?= 3x
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./...

clean:
	rm -rf bin

# Read the golden tracking and range files with non-Go readers: Debian's
# python3-avro and DuckDB from npm (installed under .cache/).
crosscheck:
	@/usr/bin/python3 -c 'import avro' 2>/dev/null || (apt-get update -qq && apt-get install -y -qq python3-avro)
	/usr/bin/python3 scripts/crosscheck_avro.py format/testdata/tracking_sample.avro
	@test -d .cache/duckdb/node_modules/@duckdb/node-api || (mkdir -p .cache/duckdb && cd .cache/duckdb && npm install --silent --no-audit --no-fund @duckdb/node-api >/dev/null)
	cp scripts/crosscheck_parquet.mjs .cache/duckdb/ && node .cache/duckdb/crosscheck_parquet.mjs format/testdata/rangefile_sample.parquet
	node .cache/duckdb/crosscheck_parquet.mjs format/testdata/rangefile_copied_sample.parquet

# The main job on the embedded default, no services needed: a CDC stream
# for 60s while the daemon keeps two indexes fresh, then verify on both.
demo: build
	./bin/streamidx demo --dir streamidx-demo

# Write the Kafka Connect control-event samples of ingest/testdata/connect
# again, with Debian's python3-avro from the sink's published schemas.
connect-samples:
	@/usr/bin/python3 -c 'import avro' 2>/dev/null || (apt-get update -qq && apt-get install -y -qq python3-avro)
	/usr/bin/python3 scripts/connect_samples.py
