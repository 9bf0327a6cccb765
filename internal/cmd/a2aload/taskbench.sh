#!/usr/bin/env bash
# taskbench.sh — the task-throughput figures of docs/benchmarks.md ("A capsule under 200
# A2A clients") in one sitting: the wordcount script capsule with its lifecycle set to
# `queue` (queue_depth 1000) and the task store on, loaded by a2aload at 1, 16 and 200
# clients, each client in its own context and then a new context per task; the plain
# `respond "ok"` route of the same Caddy; then two `-verify` runs (none lost, none
# duplicated). Each line ends with the gateway's CPU time per completed task.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/taskbench.sh [seconds per load, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
dur=${1:-15}s
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

go build -o "$dir/caddy" ./cmd/caddy
go build -o "$dir/capsulegate-sandbox" ./cmd/capsulegate-sandbox
. internal/cmd/a2aload/gateway.sh

echo "start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in -same-context ""; do
	start "$dir/caddy"
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	for c in 1 16 200; do
		c0=$(cpu)
		out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$c" -duration "$dur")
		c1=$(cpu)
		echo "${mode:-new-context-per-task} $out; cpu $(perTask "$c0" "$c1" "$out")"
	done
	stop
done
start "$dir/caddy"
for c in 1 16 200; do
	echo "plain $("$dir/a2aload" -url http://127.0.0.1:9302/ -plain -clients "$c" -duration 10s)"
done
stop
start "$dir/caddy"
echo "verify -same-context: $("$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients 200 -duration "$dur" -verify 2>&1 | tr '\n' ' ')"
echo "verify new-context-per-task: $("$dir/a2aload" -url http://127.0.0.1:9301/ -clients 200 -duration "$dur" -verify 2>&1 | tr '\n' ' ')"
stop
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
