#!/usr/bin/env bash
# tracebench.sh — what tracing costs: the task benchmark's gateway (the wordcount script
# capsule, queue, task store on) under the 200-client load (CLIENTS when set), with
# tracing off (A) and on (B) at the sampling ratio given (default 1.0), alternated A B,
# B A … for the given rounds. Traces go over OTLP/HTTP to a route of the same gateway
# answering 200, so the figure is what making, batching and sending spans costs, not a
# collector's. Requests carry no traceparent: the ratio decides every trace.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/tracebench.sh [sampling, default 1.0] [rounds, default 3] [seconds, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
sampling=${1:-1.0} rounds=${2:-3} dur=${3:-15}s clients=${CLIENTS:-200}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
. internal/cmd/a2aload/gateway.sh
build_gateway
# B: the same gateway, exporting every span to its own OTLP route.
sed "s|\tcapsule {|\tcapsule {\n\t\totel {\n\t\t\tendpoint http://127.0.0.1:9318\n\t\t\tsampling $sampling\n\t\t}|" "$dir/Caddyfile" > "$dir/Caddyfile.traced"
printf 'http://127.0.0.1:9318 {\n\trespond 200\n}\n' >> "$dir/Caddyfile.traced"
machine

run() { # A|B round
	local cf=$dir/Caddyfile
	[ "$1" = B ] && cf=$dir/Caddyfile.traced
	start "$dir/caddy" "$cf"
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	local before c0 c1 out
	before=$(load)
	c0=$(cpu)
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ -same-context -clients "$clients" -duration "$dur")
	c1=$(cpu)
	stop
	echo "$1 (load $before) $out; cpu $(perTask "$c0" "$c1" "$out")"
}
echo "start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), sampling $sampling"
alternate "$rounds" "tracing off" "tracing on, sampling $sampling"
