#!/usr/bin/env bash
# The servers of `make itest` (stack 2), on loopback, in a throwaway state
# directory:
#   - PostgreSQL (Debian's postgresql package): a fresh cluster made with
#     initdb, started with pg_ctl on a free port. It is the Iceberg SQL
#     catalog and the index catalog of the tests.
#   - SeaweedFS (`weed server -s3`): the S3 object store of the warehouse and
#     the index files. weed is built from the Go module proxy once and cached
#     in $STREAMIDX_CACHE (default ~/.cache/streamidx).
#
#   scripts/itest-stack.sh install      install / build what is missing
#   scripts/itest-stack.sh start DIR    start both servers with their state in
#                                       DIR; writes DIR/env (the test variables)
#   scripts/itest-stack.sh stop DIR     stop them and delete DIR
#   scripts/itest-stack.sh run CMD...   install, start, run CMD with the test
#                                       variables set, stop (also on failure)
set -euo pipefail

export PATH="/usr/local/go/bin:${PATH}"
WEED_MODULE=github.com/seaweedfs/seaweedfs
WEED_VERSION=v0.0.0-20261109003541-7506e5f91cd6
CACHE="${STREAMIDX_CACHE:-${HOME}/.cache/streamidx}"
WEED="${CACHE}/weed-${WEED_VERSION##*-}"
S3_BUCKET=streamidx-itest

log() { echo "itest-stack: $*" >&2; }

pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { echo "$d"; return 0; }
	done
	return 1
}

install_postgres() {
	pg_bin >/dev/null && return 0
	log "installing Debian's postgresql package"
	if [ "$(id -u)" != 0 ]; then
		log "PostgreSQL is missing and installing it needs root: apt-get install postgresql"
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	pg_bin >/dev/null
}

# build_weed builds SeaweedFS from the Go module proxy. `go install` refuses
# the module (its go.mod has replace directives), so the module is copied out
# of the module cache and built in place.
build_weed() {
	[ -x "$WEED" ] && return 0
	log "building SeaweedFS ${WEED_VERSION} (about 6 minutes on a cold cache)"
	local scratch dir
	scratch=$(mktemp -d)
	(
		cd "$scratch"
		go mod init scratch >/dev/null 2>&1
		dir=""
		for i in 1 2 3; do
			dir=$(go mod download -json "${WEED_MODULE}@${WEED_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') && [ -n "$dir" ] && break
			log "go mod download failed (try $i)"; sleep 5
		done
		[ -n "$dir" ] || { log "could not download ${WEED_MODULE}@${WEED_VERSION}"; exit 1; }
		cp -r "$dir" src
		chmod -R u+w src
		cd src
		mkdir -p "$CACHE"
		go build -o "${WEED}.tmp" ./weed
		mv "${WEED}.tmp" "$WEED"
	)
	rm -rf "$scratch"
}

install() {
	install_postgres
	build_weed
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on, and
# whose +10000 neighbour (SeaweedFS's gRPC port) is free too.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 25000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
			! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null &&
			! grep -qx "$p" "$PORTS_TAKEN" 2>/dev/null; then
			echo "$p" >>"$PORTS_TAKEN"
			echo "$p"
			return
		fi
	done
}

# as_pg_user runs a PostgreSQL program as the user that owns the cluster:
# initdb and postgres refuse to run as root, so root hands them to the
# postgres user that Debian's package creates.
as_pg_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start_postgres() {
	local dir=$1 bin port
	bin=$(pg_bin)
	port=$(free_port)
	mkdir -p "$dir/pg"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir/pg"
	as_pg_user "$bin/initdb" -D "$dir/pg/data" -U streamidx --auth=trust -E UTF8 >"$dir/pg/initdb.log" 2>&1 ||
		{ cat "$dir/pg/initdb.log" >&2; return 1; }
	as_pg_user "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w -t 60 \
		-o "-p $port -k $dir/pg -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null ||
		{ cat "$dir/pg/server.log" >&2; return 1; }
	as_pg_user "$bin/createdb" -h 127.0.0.1 -p "$port" -U streamidx streamidx
	echo "export STREAMIDX_TEST_POSTGRES_DSN='postgres://streamidx@127.0.0.1:${port}/streamidx?sslmode=disable'" >>"$dir/env"
	log "PostgreSQL on 127.0.0.1:$port"
}

start_weed() {
	local dir=$1 s3 master volume filer
	s3=$(free_port) master=$(free_port) volume=$(free_port) filer=$(free_port)
	mkdir -p "$dir/weed"
	# Telemetry off and the extra servers (Iceberg REST, Lance) off: the
	# tests need S3 on loopback and nothing else.
	setsid "$WEED" server -dir="$dir/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-master.port="$master" -volume.port="$volume" -filer.port="$filer" \
		-s3 -s3.port="$s3" -s3.port.iceberg=0 -s3.port.lance=0 \
		-master.telemetry=false -master.volumeSizeLimitMB=1024 -volume.max=0 \
		-volume.preStopSeconds=0 >"$dir/weed/server.log" 2>&1 &
	echo $! >"$dir/weed/pid"
	local i
	for i in $(seq 1 120); do
		# S3 answers once the filer is up; a bucket can be created only
		# when a volume server has joined the master.
		if curl -sf -o /dev/null -X PUT "http://127.0.0.1:${s3}/${S3_BUCKET}" 2>/dev/null ||
			curl -s "http://127.0.0.1:${s3}/${S3_BUCKET}" 2>/dev/null | grep -q ListBucketResult; then
			break
		fi
		kill -0 "$(cat "$dir/weed/pid")" 2>/dev/null || { cat "$dir/weed/server.log" >&2; return 1; }
		sleep 0.5
	done
	curl -s "http://127.0.0.1:${s3}/${S3_BUCKET}" | grep -q ListBucketResult ||
		{ log "SeaweedFS did not serve S3"; tail -50 "$dir/weed/server.log" >&2; return 1; }
	cat >>"$dir/env" <<EOF
export STREAMIDX_TEST_S3_ENDPOINT='http://127.0.0.1:${s3}'
export STREAMIDX_TEST_S3_BUCKET='${S3_BUCKET}'
EOF
	log "SeaweedFS S3 on 127.0.0.1:$s3 (bucket $S3_BUCKET)"
}

start() {
	local dir=$1
	mkdir -p "$dir"
	: >"$dir/env"
	PORTS_TAKEN="$dir/ports"
	# root's temp dir must be reachable by the postgres user
	chmod 755 "$dir"
	start_postgres "$dir"
	start_weed "$dir"
}

stop() {
	local dir=$1 bin pid
	[ -d "$dir" ] || return 0
	if [ -f "$dir/pg/data/postmaster.pid" ] && bin=$(pg_bin); then
		as_pg_user "$bin/pg_ctl" -D "$dir/pg/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if [ -f "$dir/weed/pid" ]; then
		pid=$(cat "$dir/weed/pid")
		# weed runs in its own session (setsid): end its process group.
		kill -TERM -- "-$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}

case "${1:-}" in
install) install ;;
start) start "${2:?state directory}" ;;
stop) stop "${2:?state directory}" ;;
run)
	shift
	install
	state=$(mktemp -d /tmp/streamidx-itest.XXXXXX)
	trap 'stop "$state"' EXIT
	trap 'exit 130' INT TERM
	start "$state"
	# shellcheck disable=SC1091
	. "$state/env"
	"$@"
	;;
*)
	sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
