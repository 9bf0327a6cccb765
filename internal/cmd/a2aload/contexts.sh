#!/usr/bin/env bash
# contexts.sh — whether contexts pile up (docs/benchmarks.md "Contexts at scale"): the
# gateway of taskbench.sh, one start, measures the 200-client figure in both modes
# (a context per client, a new context per task), then creates and retires COUNT
# contexts (default 100,000: a new context per task at 200 clients; the gateway retires
# each past its 1,000 open ones), then measures both figures again and prints each
# after/before ratio, then once more after a sync, when the kernel has written back what
# the contexts left (right after them, that writeback shares the two cores with the load).
# The gateway is never restarted in between, so the folders the contexts left stay in its
# work_root, as on a gateway that has served that many.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/contexts.sh [count, default 100000] [seconds per figure, default 10]
set -euo pipefail
cd "$(dirname "$0")/../../.."
count=${1:-100000}
dur=${2:-10}s
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

. internal/cmd/a2aload/gateway.sh
build_gateway

rate() { echo "$1" | sed -n 's/.* \([0-9]*\) tasks\/s.*/\1/p'; }
figures() {
	for mode in -same-context ""; do
		out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients 200 -duration "$dur")
		echo "  ${mode:-new-context-per-task} (load $(load)): $out" >&2
		rate "$out"
	done
}
machine
start "$dir/caddy"
"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
echo "fresh start:"
read -r -d '' -a before < <(figures && printf '\0') || true
t0=$(date +%s)
echo "creating and retiring $count contexts: $("$dir/a2aload" -url http://127.0.0.1:9301/ -clients 200 -tasks "$count" -duration 24h)"
echo "  took $(($(date +%s) - t0)) s; context folders in work_root: $(find "$dir/work" -mindepth 2 -maxdepth 2 -type d | wc -l)"
echo "after $count contexts:"
read -r -d '' -a after < <(figures && printf '\0') || true
t0=$(date +%s)
sync
echo "after a sync ($(($(date +%s) - t0)) s):"
read -r -d '' -a synced < <(figures && printf '\0') || true
stop
i=0
for mode in same-context new-context-per-task; do
	echo "$mode: ${before[$i]} tasks/s fresh, ${after[$i]} after: $(awk -v a="${after[$i]}" -v b="${before[$i]}" 'BEGIN {printf "%.2f", a / b}')×," \
		"${synced[$i]} after the sync: $(awk -v a="${synced[$i]}" -v b="${before[$i]}" 'BEGIN {printf "%.2f", a / b}')×"
	i=$((i + 1))
done
