#!/usr/bin/env bash
# fleetbench.sh — one gateway on PostgreSQL against three gateways on the same database
# behind a front Caddy balancing round robin, under the task benchmark's load (CLIENTS
# clients, default 200, each in its own context; NEW=1: a new context per task, the
# stateless case), in turn A B, B A … for the given rounds, one gateway binary, a fresh
# PostgreSQL cluster (internal/cmd/pgcluster, durable: fsync and synchronous_commit on)
# and fresh gateways for every run. A is one gateway, its site on :9301; B is three
# (gw-1..gw-3, sites :9311-:9313, admin :9391-:9393) behind a front Caddy on :9301. All of
# it — gateways, front, database, load generator — shares this machine's cores: B shows
# what a fleet costs on one machine, not what it scales to on three. Each line gives the
# database round trips per completed task, counted two ways: the gateways'
# capsule_store_round_trips_total summed, and PostgreSQL's committed transactions
# (pg_stat_database.xact_commit); both include the replicas' lease renewals and orphan
# scans. The machine line opens the report, the PostgreSQL version comes with the first
# run, and each run's line gives the load average before it. The ratio of the medians is last.
#
# Run from the repository root after `make examples`:
#   internal/cmd/a2aload/fleetbench.sh [rounds, default 3] [seconds, default 15]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} dur=${2:-15}s clients=${CLIENTS:-200} mode=-same-context
if [ -n "${NEW:-}" ]; then mode=; fi
dir=$(mktemp -d)
pgpid= pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; [ -n "$pgpid" ] && kill $pgpid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
pid=
. internal/cmd/a2aload/gateway.sh
build_gateway
build_pg
machine

# gwconf NAME PORT ADMIN: a replica's Caddyfile, the benchmark's capsule on PORT.
gwconf() {
	cat <<CADDY
{
	admin 127.0.0.1:$3
	default_bind 127.0.0.1
	capsule {
		registry $PWD/examples/registry
		work_root $dir/run/$1/work
		cache_dir $dir/cache/$1
		state_dir $dir/run/$1/state
		store {env.CAPSULE_STORE}
		instance $1
	}
}
http://127.0.0.1:$2 {
	capsule $dir/cap/murmur.yaml
}
http://127.0.0.1:$(($2 + 100)) {
	respond "ok"
}
CADDY
}
cat > "$dir/front" <<CADDY
{
	admin off
	default_bind 127.0.0.1
}
http://127.0.0.1:9301 {
	reverse_proxy 127.0.0.1:9311 127.0.0.1:9312 127.0.0.1:9313 {
		lb_policy round_robin
	}
}
CADDY

# serve NAME PORT ADMIN: start a replica, its pid appended to pids, once it answers.
serve() {
	mkdir -p "$dir/run/$1"
	gwconf "$@" > "$dir/run/$1/Caddyfile"
	"$dir/caddy" run --config "$dir/run/$1/Caddyfile" --adapter caddyfile > "$dir/run/$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$(($2 + 100))/" && return; sleep 0.1; done
	echo "gateway $1 did not start:" >&2
	cat "$dir/run/$1.log" >&2
	exit 1
}
metric() { # the sum of series $1 over the admin ports given
	local m=$1 s=0 v
	shift
	for a in "$@"; do
		v=$(curl -s "http://127.0.0.1:$a/metrics" | awk -v m="$m" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%d", s}')
		s=$((s + v))
	done
	echo "$s"
}
cputicks() { local s=0; for p in "${pids[@]}"; do s=$((s + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo "$s"; }

run() { # A|B round
	rm -rf "$dir/run"
	start_pg PostgreSQL:
	pids=()
	if [ "$1" = A ]; then
		serve gw-1 9301 9391
		admins=(9391)
	else
		serve gw-1 9311 9391
		serve gw-2 9312 9392
		serve gw-3 9313 9393
		"$dir/caddy" run --config "$dir/front" --adapter caddyfile > "$dir/front.log" 2>&1 &
		pids+=($!)
		for _ in $(seq 100); do curl -s -o /dev/null -X POST http://127.0.0.1:9301/ && break; sleep 0.1; done
		admins=(9391 9392 9393)
	fi
	"$dir/a2aload" -url http://127.0.0.1:9301/ -clients 4 -duration 2s > /dev/null # warm up
	before=$(load)
	c0=$(cputicks)
	r0=$(metric capsule_store_round_trips_total "${admins[@]}") x0=$(commits)
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ $mode -clients "$clients" -duration "$dur")
	c1=$(cputicks)
	r1=$(metric capsule_store_round_trips_total "${admins[@]}") x1=$(commits)
	claims=$(metric capsule_fleet_claims_total "${admins[@]}")
	n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
	extra=$(awk -v r=$((r1 - r0)) -v x=$((x1 - x0)) -v n="${n:-0}" 'BEGIN{if (n > 0) printf "round trips/task %.2f (gateways), %.2f (xact_commit)", r/n, x/n}')
	kill "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
	stop_pg
	echo "$1 round $2 (load $before): $out; cpu $(awk -v a="$c0" -v b="$c1" -v n="${n:-1}" -v t="$tck" 'BEGIN{printf "%.2f ms/task", (b-a)*1000/t/n}') (gateways and front); $extra; claims $claims"
}
echo "start $(date -u +%FT%TZ), load $(load), $clients clients ${mode:-new-context-per-task}; A one gateway, B three behind a front Caddy"
alternate "$rounds" "one gateway" "three behind a front"
echo "end $(date -u +%FT%TZ), load $(load)"
