#!/usr/bin/env bash
# Runs the README's kcat session ("The embedded broker"): an events-fed
# index fed by hand with kcat (Debian package kcat) through a daemon on the
# embedded broker, printing each command and what it answered, then verify
# of every index snapshot. The README's block is this script's output.
#
#   make build && scripts/kcat-session.sh [DIR]
set -u
BIN=$(realpath "$(dirname "$0")/../bin")
export PATH=$BIN:$PATH
DIR=${1:-/tmp/streamidx-kcat-session}
command -v kcat >/dev/null || { echo "kcat is not installed (apt-get install kcat)" >&2; exit 1; }
mkdir -p "$DIR" && cd "$DIR" && rm -rf streamidx-data by_status.yaml run.log
echo '$ streamidx gen-table --table demo.orders --rows 1000'
OUT=$(streamidx gen-table --table demo.orders --rows 1000 2>&1 | grep 'appended orders'); echo "$OUT"
S0=$(echo "$OUT" | sed 's/.*snapshot=//')
cat > by_status.yaml <<'YAML'
name: by_status
source: events                 # follow the change topic, not the table
identity: [status, order_id]
cluster: [status, order_id]
YAML
streamidx create --table demo.orders --def by_status.yaml
streamidx run --table demo.orders --index by_status --embedded-kafka 127.0.0.1:19092 \
    --change-topic orders-cdc=demo.orders --http 127.0.0.1:19464 > run.log 2>&1 &
RUNPID=$!
sleep 3
echo "{\"table\":\"demo.orders\",\"snapshot-id\":$S0,\"offsets\":{\"orders-cdc\":{\"0\":0}}}" | kcat -b 127.0.0.1:19092 -t streamidx-commits -P
echo '$ streamidx gen-table --table demo.orders --start 1000 --rows 2'
OUT=$(streamidx gen-table --table demo.orders --start 1000 --rows 2 2>&1 | grep 'appended orders'); echo "$OUT"
S1=$(echo "$OUT" | sed 's/.*snapshot=//')
kcat -b 127.0.0.1:19092 -t orders-cdc -P -K '|' <<'K'
{"order_id":1000}|{"op":"c","before":null,"after":{"order_id":1000,"status":"new"}}
{"order_id":1001}|{"op":"c","before":null,"after":{"order_id":1001,"status":"new"}}
K
echo "{\"table\":\"demo.orders\",\"snapshot-id\":$S1,\"offsets\":{\"orders-cdc\":{\"0\":2}}}" | kcat -b 127.0.0.1:19092 -t streamidx-commits -P
sleep 2
echo "\$ streamidx lookup --table demo.orders --index by_status --where \"status = 'new' AND order_id >= 999\""
streamidx lookup --table demo.orders --index by_status --where "status = 'new' AND order_id >= 999"
echo '$ streamidx gen-table --table demo.orders --rows 1002 --upsert 2 --pattern tail'
OUT=$(streamidx gen-table --table demo.orders --rows 1002 --upsert 2 --pattern tail 2>&1); echo "$OUT"
S2=$(echo "$OUT" | sed 's/.*snapshot //')
kcat -b 127.0.0.1:19092 -t orders-cdc -P -Z -K '|' <<'K'
{"order_id":1000}|{"op":"u","before":{"order_id":1000,"status":"new"},"after":{"order_id":1000,"status":"paid"}}
{"order_id":1001}|{"op":"u","before":{"order_id":1001},"after":{"order_id":1001,"status":"paid"}}
{"order_id":1001}|{"op":"u","before":{"order_id":1001,"status":"new"},"after":{"order_id":1001,"status":"paid"}}
{"order_id":7}|
K
echo "{\"table\":\"demo.orders\",\"snapshot-id\":$S2,\"offsets\":{\"orders-cdc\":{\"0\":6}}}" | kcat -b 127.0.0.1:19092 -t streamidx-commits -P
sleep 2
echo '$ streamidx lookup --table demo.orders --index by_status --where "order_id >= 1000"'
streamidx lookup --table demo.orders --index by_status --where "order_id >= 1000"
echo "\$ kcat -b 127.0.0.1:19092 -t orders-cdc.dlq -C -e -f 'headers: %h\nvalue: %s\n'"
kcat -b 127.0.0.1:19092 -t orders-cdc.dlq -C -e -f 'headers: %h\nvalue: %s\n'
echo "\$ curl -s 127.0.0.1:19464/metrics | grep -E '^streamidx_ingest_(events|event_)'"
curl -s 127.0.0.1:19464/metrics | grep -E '^streamidx_ingest_(events|event_)'
IS=$(streamidx inspect --table demo.orders --index by_status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshots"][-1]["snapshot_id"])' 2>/dev/null)
echo "\$ streamidx verify --table demo.orders --index by_status --snapshot $IS"
streamidx verify --table demo.orders --index by_status --snapshot $IS
for s in $(streamidx inspect --table demo.orders --index by_status --json | python3 -c 'import json,sys; [print(x["snapshot_id"]) for x in json.load(sys.stdin)["snapshots"]]'); do streamidx verify --table demo.orders --index by_status --snapshot $s | sed 's/^/  all: /'; done
echo "index snapshots published without a full build: $(grep -c 'full_build=false' run.log)"
kill $RUNPID; wait $RUNPID 2>/dev/null
