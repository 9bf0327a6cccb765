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
root=$PWD
dur=${1:-15}s
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

go build -o "$dir/caddy" ./cmd/caddy
go build -o "$dir/capsulegate-sandbox" ./cmd/capsulegate-sandbox
go build -o "$dir/a2aload" ./internal/cmd/a2aload
mkdir -p "$dir/cap"
cp examples/capsules/wordcount/capsule.wasm examples/capsules/wordcount/murmur.lock "$dir/cap/"
sed 's/task_acceptance: single/task_acceptance: queue\n  queue_depth: 1000/' \
	examples/capsules/wordcount/murmur.yaml > "$dir/cap/murmur.yaml"
cat > "$dir/Caddyfile" <<EOF
{
	admin 127.0.0.1:9399
	default_bind 127.0.0.1
	capsule {
		registry $root/examples/registry
		work_root $dir/work
		cache_dir $dir/cache
		state_dir $dir/state
	}
}
http://127.0.0.1:9301 {
	capsule $dir/cap/murmur.yaml
}
http://127.0.0.1:9302 {
	respond "ok"
}
EOF

start() {
	rm -rf "$dir/work" "$dir/state"
	"$dir/caddy" run --config "$dir/Caddyfile" --adapter caddyfile > "$dir/caddy.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:9302/ && return; sleep 0.1; done
	echo "the gateway did not start:" >&2
	cat "$dir/caddy.log" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }
tck=$(getconf CLK_TCK)

echo "start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in -same-context ""; do
	start
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	for c in 1 16 200; do
		c0=$(cpu)
		out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$c" -duration "$dur")
		c1=$(cpu)
		n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
		echo "${mode:-new-context-per-task} $out; cpu $(awk -v a="$c0" -v b="$c1" -v n="$n" -v t="$tck" 'BEGIN{printf "%.2f ms/task", (b-a)*1000/t/n}')"
	done
	stop
done
start
for c in 1 16 200; do
	echo "plain $("$dir/a2aload" -url http://127.0.0.1:9302/ -plain -clients "$c" -duration 10s)"
done
stop
start
echo "verify -same-context: $("$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients 200 -duration "$dur" -verify 2>&1 | tr '\n' ' ')"
echo "verify new-context-per-task: $("$dir/a2aload" -url http://127.0.0.1:9301/ -clients 200 -duration "$dur" -verify 2>&1 | tr '\n' ' ')"
stop
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
