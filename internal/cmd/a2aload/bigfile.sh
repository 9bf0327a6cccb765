#!/usr/bin/env bash
# bigfile.sh — docs/benchmarks.md "A capsule that writes 1 MiB per task": the gateway of
# taskbench.sh with its script capsule replaced by internal/cmd/a2aload/bigfile (the
# wordcount capsule's work plus a 1 MiB out/big.bin per task, new bytes each time), loaded
# by a2aload at 1 and 200 clients, each client in its own context; each load ROUNDS times
# (default 3) on a fresh gateway, the median line printed after them with the gateway's
# CPU time per task. A report figure, with no target.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/bigfile.sh [seconds per load, default 15] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/../../.."
dur=${1:-15}s
rounds=${2:-3}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

. internal/cmd/a2aload/gateway.sh
build_gateway
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "$dir/cap/capsule.wasm" ./internal/cmd/a2aload/bigfile
machine
echo "start $(date -u +%FT%TZ), load $(load), $rounds rounds of $dur per load"
for c in 1 200; do
	lines=()
	for r in $(seq "$rounds"); do
		start "$dir/caddy"
		"$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients 4 -duration 2s > /dev/null # warm up
		before=$(cpu)
		out=$("$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients "$c" -duration "$dur")
		lines+=("$out; cpu $(perTask "$before" "$(cpu)" "$out")")
		stop
	done
	echo "median of $rounds (load $(load)): $(median "${lines[@]}")"
done
echo "end $(date -u +%FT%TZ), load $(load)"
