#!/usr/bin/env bash
# taskbench.sh — the task-throughput figures of docs/benchmarks.md ("A capsule under 200
# A2A clients") in one sitting: the wordcount script capsule with its lifecycle set to
# `queue` (queue_depth 1000) and the task store on, loaded by a2aload at 1, 16 and 200
# clients, each client in its own context and then a new context per task; the plain
# `respond "ok"` route of the same Caddy; then two `-verify` runs (none lost, none
# duplicated). Each load runs ROUNDS times (default 3) on a fresh gateway and the median
# line is printed after them; each line ends with the gateway's CPU time per completed
# task. The machine line (CPU, file system, kernel, Go, commit, load) opens the report
# and the load average is printed before each run. A failed -verify run, or a gateway
# that does not start, ends the script non-zero.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/taskbench.sh [seconds per load, default 15] [rounds, default 3]
set -euo pipefail
cd "$(dirname "$0")/../../.."
dur=${1:-15}s
rounds=${2:-3}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

. internal/cmd/a2aload/gateway.sh
build_gateway

machine
echo "start $(date -u +%FT%TZ), load $(load), $rounds rounds of $dur per load"

for mode in -same-context ""; do
	for c in 1 16 200; do
		lines=()
		for r in $(seq "$rounds"); do
			start "$dir/caddy"
			"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
			before=$(load)
			c0=$(cpu)
			out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$c" -duration "$dur")
			c1=$(cpu)
			stop
			line="${mode:-new-context-per-task} $out; cpu $(perTask "$c0" "$c1" "$out")"
			echo "  round $r (load $before): $line"
			lines+=("$line")
		done
		echo "median of $rounds: $(median "${lines[@]}")"
	done
done
start "$dir/caddy"
for c in 1 16 200; do
	echo "plain (load $(load)): $("$dir/a2aload" -url http://127.0.0.1:9302/ -plain -clients "$c" -duration 10s)"
done
stop
failed=0
for mode in -same-context ""; do
	start "$dir/caddy"
	before=$(load)
	if out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients 200 -duration "$dur" -verify 2>&1); then
		echo "verify ${mode:-new-context-per-task} (load $before): $(echo "$out" | tr '\n' ' ')"
	else
		echo "verify ${mode:-new-context-per-task} FAILED (load $before): $(echo "$out" | tr '\n' ' ')" >&2
		failed=1
	fi
	stop
done
echo "end $(date -u +%FT%TZ), load $(load)"
exit "$failed"
