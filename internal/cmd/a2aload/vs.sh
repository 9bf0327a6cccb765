#!/usr/bin/env bash
# vs.sh — two builds of the gateway under the task benchmark's 200-client load (CLIENTS
# clients when set), in turn:
# the wordcount script capsule (queue, queue_depth 1000, task store on) as taskbench.sh
# serves it, each client in its own context, A B, B A, A B … for the given rounds, a fresh
# gateway, work_root and state_dir for every run (NEW=1: a new context per task instead).
# Each line is a2aload's with the build's name, the load average before the run and the
# gateway's CPU time per completed task; the ratio of the medians is last.
#
# Run from the repository root after `make examples`, with two gateways each built with
# the sandbox helper beside it (go build -o DIR/caddy ./cmd/caddy; go build -o
# DIR/capsulegate-sandbox ./cmd/capsulegate-sandbox):
#   internal/cmd/a2aload/vs.sh A_DIR B_DIR [rounds, default 3] [seconds, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
a=$1 b=$2 rounds=${3:-3} dur=${4:-15}s clients=${CLIENTS:-200} mode=-same-context
if [ -n "${NEW:-}" ]; then mode=; fi
for d in "$a" "$b"; do
	[ -x "$d/caddy" ] || { echo "vs.sh: $d/caddy is not an executable gateway: build it first (see the header)" >&2; exit 2; }
done
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
. internal/cmd/a2aload/gateway.sh
machine

run() { # build-dir name
	start "$1/caddy"
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	before=$(load)
	c0=$(cpu)
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$clients" -duration "$dur")
	c1=$(cpu)
	stop
	echo "$2 (load $before) $out; cpu $(perTask "$c0" "$c1" "$out")"
}
echo "start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$rounds"); do
	# A B, then B A: whatever drifts along the sitting weighs on both alike.
	if [ $((i % 2)) = 1 ]; then run "$a" A; run "$b" B; else run "$b" B; run "$a" A; fi
done > >(tee "$dir/rows")
wait # for tee
med() { grep "^$1 " "$dir/rows" | sed -n 's/.* \([0-9.]*\) tasks\/s.*/\1/p' | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
ma=$(med A) mb=$(med B)
echo "median tasks/s: A $ma, B $mb, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.3f", b/a}')"
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
