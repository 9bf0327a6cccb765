#!/usr/bin/env bash
# vs.sh — two builds of the gateway under the task benchmark's 200-client load, in turn:
# the wordcount script capsule (queue, queue_depth 1000, task store on) as taskbench.sh
# serves it, each client in its own context, A B A B … for the given rounds, a fresh
# gateway, work_root and state_dir for every run. Each line is a2aload's with the build's
# name and the gateway's CPU time per completed task; the ratio of the medians is last.
#
# Run from the repository root after `make examples`, with two gateways each built with
# the sandbox helper beside it (go build -o DIR/caddy ./cmd/caddy; go build -o
# DIR/capsulegate-sandbox ./cmd/capsulegate-sandbox):
#   internal/cmd/a2aload/vs.sh A_DIR B_DIR [rounds, default 3] [seconds, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
a=$1 b=$2 rounds=${3:-3} dur=${4:-15}s
for d in "$a" "$b"; do
	[ -x "$d/caddy" ] || { echo "vs.sh: $d/caddy is not an executable gateway: build it first (see the header)" >&2; exit 2; }
done
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
go build -o "$dir/a2aload" ./internal/cmd/a2aload
mkdir -p "$dir/cap"
cp examples/capsules/wordcount/capsule.wasm examples/capsules/wordcount/murmur.lock "$dir/cap/"
sed 's/task_acceptance: single/task_acceptance: queue\n  queue_depth: 1000/' \
	examples/capsules/wordcount/murmur.yaml > "$dir/cap/murmur.yaml"
cat > "$dir/Caddyfile" <<CADDY
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
CADDY
tck=$(getconf CLK_TCK)
run() { # build-dir name
	rm -rf "$dir/work" "$dir/state"
	"$1/caddy" run --config "$dir/Caddyfile" --adapter caddyfile > "$dir/caddy.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:9302/ && break; sleep 0.1; done
	curl -s -o /dev/null http://127.0.0.1:9302/ || { echo "vs.sh: the gateway $1/caddy did not start:" >&2; cat "$dir/caddy.log" >&2; exit 1; }
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	c0=$(awk '{print $14+$15}' "/proc/$pid/stat")
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients 200 -duration "$dur")
	c1=$(awk '{print $14+$15}' "/proc/$pid/stat")
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
	n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
	[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "vs.sh: no task completed on $1/caddy: $out" >&2; exit 1; }
	echo "$2 $out; cpu $(awk -v a="$c0" -v b="$c1" -v n="$n" -v t="$tck" 'BEGIN{printf "%.2f ms/task", (b-a)*1000/t/n}')"
}
echo "start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$rounds"); do
	run "$a" A
	run "$b" B
done | tee "$dir/rows"
med() { grep "^$1 " "$dir/rows" | sed -n 's/.* \([0-9.]*\) tasks\/s.*/\1/p' | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
ma=$(med A) mb=$(med B)
echo "median tasks/s: A $ma, B $mb, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.3f", b/a}')"
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
