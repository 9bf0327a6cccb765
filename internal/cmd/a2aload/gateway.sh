# gateway.sh — sourced by every benchmark script here: in $dir (made by the caller), the
# wordcount script capsule with its lifecycle set to `queue` (queue_depth 1000), a
# Caddyfile serving it on 127.0.0.1:9301 with the task store on and the plain
# `respond "ok"` route on 127.0.0.1:9302, and the a2aload binary; `start BIN [CADDYFILE]`
# runs the gateway BIN (on $dir/Caddyfile unless CADDYFILE) on a fresh work_root and
# state_dir (pid in $pid), `stop` ends it, `cpu`
# reads its CPU ticks, `load` the load average, `build_gateway` builds the gateway and the sandbox helper into
# $dir as `make caddy` does, `build_pg` builds the PostgreSQL helper and finds psql,
# `start_pg LABEL` starts a fresh cluster (URL in $CAPSULE_STORE, pid in $pgpid), `stop_pg`
# removes it, `commits` reads its xact_commit, `machine` prints the line every report starts with, `median`
# the median of a2aload lines, `alternate` runs the caller's `run A|B` in turn and compares.
for f in examples/capsules/wordcount/capsule.wasm examples/capsules/wordcount/murmur.lock; do
	[ -e "$f" ] || { echo "$0: $f is missing: run \`make examples\` first" >&2; exit 1; }
done
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
		registry $PWD/examples/registry
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

# build_gateway builds $dir/caddy with the Makefile's CADDY_FLAGS and the sandbox helper.
build_gateway() {
	go build -trimpath -tags nobadger,nomysql,nopgx -o "$dir/caddy" ./cmd/caddy
	go build -o "$dir/capsulegate-sandbox" ./cmd/capsulegate-sandbox
}
# build_pg builds internal/cmd/pgcluster into $dir and sets $psql (the newest Debian
# install's, else the one on PATH).
build_pg() {
	go build -o "$dir/pgcluster" ./internal/cmd/pgcluster
	psql=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -1 || true)
	psql=${psql:-psql}
}
# start_pg LABEL starts a fresh durable cluster and exports its URL as CAPSULE_STORE; the
# server's version is printed after LABEL once.
start_pg() {
	coproc PG { "$dir/pgcluster"; }
	pgpid=$PG_PID
	read -r CAPSULE_STORE <&"${PG[0]}"
	export CAPSULE_STORE
	if [ -z "${pgversion:-}" ]; then
		pgversion=$("$psql" "$CAPSULE_STORE" -tAc "SELECT version()")
		echo "$1 $pgversion"
	fi
}
# stop_pg ends the cluster, which pgcluster removes when signalled.
stop_pg() { kill "$pgpid"; wait "$pgpid" 2>/dev/null || true; pgpid=; }
commits() { "$psql" "$CAPSULE_STORE" -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
# machine prints what a figure is measured on: CPU, memory, file system of $dir, kernel,
# Go, commit.
machine() {
	echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs," \
		"$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), file system $(df -T "$dir" | awk 'NR==2 {print $2}')," \
		"kernel $(uname -r), $(go version | cut -d' ' -f3), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet 2>/dev/null || echo +changes)"
}

start() {
	# The last run's folders are moved aside, not removed: removing the tens of thousands
	# of folders a run with a new context per task leaves slowed the next runs for
	# minutes, even after a sync (on ext4 mounted with discard: 446 tasks/s against 1,120
	# on a first start, docs/benchmarks.md), and a gateway never removes them itself.
	# The EXIT trap of the sourcing script removes them with $dir.
	runs=$((${runs:-0} + 1))
	mkdir -p "$dir/old"
	for d in work state; do
		if [ -e "$dir/$d" ]; then mv "$dir/$d" "$dir/old/$d.$runs"; fi
	done
	"$1" run --config "${2:-$dir/Caddyfile}" --adapter caddyfile > "$dir/caddy.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:9302/ && return; sleep 0.1; done
	echo "the gateway $1 did not start:" >&2
	cat "$dir/caddy.log" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }
# load prints the load average (1, 5 and 15 minutes), which every figure's line carries.
load() { cut -d' ' -f1-3 /proc/loadavg; }
# perTask prints the CPU ms per task between tick counts $1 and $2 for a2aload's line $3.
perTask() {
	local n
	n=$(echo "$3" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
	[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "no task completed: $3" >&2; exit 1; }
	awk -v a="$1" -v b="$2" -v n="$n" -v t="$tck" 'BEGIN{printf "%.2f ms/task", (b-a)*1000/t/n}'
}
# median prints the line of $@ (a2aload lines with "N tasks/s") whose tasks/s is the median.
median() {
	printf '%s\n' "$@" | awk '{for (i = 1; i < NF; i++) if ($(i+1) == "tasks/s" || $(i+1) == "tasks/s,") print $i "\t" $0}' |
		sort -n | awk -v n="$#" 'NR == int((n+1)/2) {sub(/^[^\t]*\t/, ""); print}'
}
# alternate ROUNDS NAME_A NAME_B calls the sourcing script's `run A i` and `run B i` in turn
# A B, B A … for ROUNDS rounds, its lines kept in $dir/rows, then prints the median tasks/s
# of each and their ratio.
alternate() {
	for i in $(seq "$1"); do
		if [ $((i % 2)) = 1 ]; then run A "$i"; run B "$i"; else run B "$i"; run A "$i"; fi
	done > >(tee "$dir/rows")
	wait $! 2>/dev/null || true
	local ma mb
	ma=$(rowsMedian A) mb=$(rowsMedian B)
	echo "median tasks/s: A ($2) $ma, B ($3) $mb, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.3f", b/a}')"
}
rowsMedian() { grep "^$1 " "$dir/rows" | sed -n 's/.* \([0-9.]*\) tasks\/s.*/\1/p' | sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
