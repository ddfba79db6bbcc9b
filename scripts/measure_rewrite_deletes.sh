#!/usr/bin/env bash
# Measures `streamidx rewrite-deletes` against a compaction of the same
# table: two identical v3 tables of ROWS orders after UPSERTS upsert commits
# of KEYS keys each (equality delete + new versions), one rewritten into
# deletion vectors through a pk index, the other compacted with iceberg-go's
# RewriteDataFiles; iceberg-go's full scan timed on each, before and after.
#
#   make build && scripts/measure_rewrite_deletes.sh [DIR]
#
# Environment: STREAMIDX (default bin/streamidx), ROWS (5000000), UPSERTS
# (50), KEYS (10000), SCANS (3, full scans timed per table state).
set -euo pipefail

S=$(realpath "${STREAMIDX:-bin/streamidx}")
ROWS=${ROWS:-5000000}
UPSERTS=${UPSERTS:-50}
KEYS=${KEYS:-10000}
SCANS=${SCANS:-3}
DIR=${1:-/tmp/streamidx-rewrite-measure}

rm -rf "$DIR"
for t in rewrite compact; do
	mkdir -p "$DIR/$t"
	(
		cd "$DIR/$t"
		"$S" --log-level warn gen-table --table demo.orders --rows "$ROWS" --format-version 3
		for i in $(seq 1 "$UPSERTS"); do
			"$S" --log-level warn gen-table --table demo.orders --rows "$ROWS" --upsert "$KEYS" --pattern uniform --seed "$i" >/dev/null
		done
	)
done

scans() {
	for _ in $(seq 1 "$SCANS"); do
		/usr/bin/time -f "  peak RSS %M KB" "$S" --log-level warn scan-table --table demo.orders
	done
}

cd "$DIR/rewrite"
echo "== before: equality deletes"
scans
printf 'name: pk\nidentity: [order_id]\nmaterialized: [_file, _pos]\ncluster: [order_id]\n' >pk.yaml
"$S" --log-level warn create --table demo.orders --def pk.yaml >/dev/null
"$S" --log-level warn build --table demo.orders --index pk | grep entries
echo "== rewrite-deletes (the index is aligned: --no-align times the rewrite alone)"
/usr/bin/time -f "  %e s wall, %U s user, %S s sys, peak RSS %M KB" "$S" --log-level warn rewrite-deletes --table demo.orders --no-align | tail -1
echo "== the index follows the rewrite's two snapshots"
/usr/bin/time -f "  %e s wall, %U s user, %S s sys, peak RSS %M KB" "$S" --log-level warn run --once --http none --stage-dir "$DIR/stage" --table demo.orders --index pk
echo "== after rewrite-deletes"
scans
"$S" --log-level warn verify --table demo.orders --index pk | head -1

cd "$DIR/compact"
echo "== compact-table (iceberg-go RewriteDataFiles)"
/usr/bin/time -f "  %e s wall, %U s user, %S s sys, peak RSS %M KB" "$S" --log-level warn compact-table --table demo.orders
echo "== after compaction"
scans
