#!/usr/bin/env bash
# storebench.sh — the task store on bbolt against the task store on PostgreSQL, under the
# task benchmark's load (CLIENTS clients, default 200, each in its own context; NEW=1: a
# new context per task), in turn A B, B A … for the given rounds, one gateway binary, a
# fresh gateway, work_root and state (file or database) for every run. A is the bbolt file
# in state_dir; B is PostgreSQL on this machine, a cluster internal/cmd/pgcluster starts
# with its durable defaults (fsync and synchronous_commit on). Each B line also gives the
# database round trips per completed task, counted two ways: the gateway's
# capsule_store_round_trips_total and PostgreSQL's own committed transactions
# (pg_stat_database.xact_commit, which counts every statement run outside a transaction
# block too). The machine line (CPU, file system, kernel, Go, commit) opens the report, the
# PostgreSQL server's version comes with the first B run, and each run's line gives the
# load average before it. The ratio of the medians is last.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/storebench.sh [rounds, default 3] [seconds, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} dur=${2:-15}s clients=${CLIENTS:-200} mode=-same-context
if [ -n "${NEW:-}" ]; then mode=; fi
dir=$(mktemp -d)
pgpid=
trap 'kill $pid 2>/dev/null || true; [ -n "$pgpid" ] && kill $pgpid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
pid=
. internal/cmd/a2aload/gateway.sh
build_gateway
build_pg
machine

# The PostgreSQL gateway's Caddyfile: the same, with the store in the database.
sed "s|state_dir $dir/state|state_dir $dir/state\n\t\tstore {env.CAPSULE_STORE}|" "$dir/Caddyfile" > "$dir/Caddyfile.pg"

metric() { curl -s http://127.0.0.1:9399/metrics | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%d", s}'; }

run() { # A|B round
	if [ "$1" = B ]; then
		start_pg B:
		start "$dir/caddy" "$dir/Caddyfile.pg"
	else
		start "$dir/caddy"
	fi
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	before=$(load)
	c0=$(cpu)
	if [ "$1" = B ]; then r0=$(metric capsule_store_round_trips_total) x0=$(commits); fi
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$clients" -duration "$dur")
	c1=$(cpu)
	extra=
	if [ "$1" = B ]; then
		r1=$(metric capsule_store_round_trips_total) x1=$(commits)
		n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
		extra=$(awk -v r=$((r1 - r0)) -v x=$((x1 - x0)) -v n="${n:-0}" 'BEGIN{if (n > 0) printf "; round trips/task %.2f (gateway), %.2f (xact_commit)", r/n, x/n}')
	fi
	stop
	if [ "$1" = B ]; then stop_pg; fi
	echo "$1 round $2 (load $before): $out; cpu $(perTask "$c0" "$c1" "$out")$extra"
}
echo "start $(date -u +%FT%TZ), load $(load), $clients clients ${mode:-new-context-per-task}; A bbolt, B PostgreSQL"
alternate "$rounds" "bbolt" "PostgreSQL"
echo "end $(date -u +%FT%TZ), load $(load)"
