#!/usr/bin/env bash
# syscalls.sh — a task's file-system system calls (docs/benchmarks.md "File-system work per
# task"): the gateway of taskbench.sh (the wordcount script capsule, the task store on)
# warmed up, then strace -f -c attached to every thread of it while a2aload sends TASKS
# tasks, for each of: 1 and 200 clients, each client in its own (warm) context and a new
# context per task. Then the same four runs for the hello agent (examples/capsules/hello:
# its driver guest, the wordcount tool and a skill, the model answered by the replay
# provider from examples/cassettes on 127.0.0.1:9304, the task "count the words", queue
# depth 1000; HELLO_TASKS tasks per run, default TASKS/10). Prints each run's count of the
# file-system calls per completed task, by kind, then strace's whole table. strace -c
# counts a call by its name only, so a write(2) to a client's socket counts as a write
# (and the hello agent's requests to the replay provider, and the provider's answers, as
# more); a last run per capsule (warm contexts, 200 clients) traces each call with the
# file it acts on (strace -y) and prints the calls per task by where they land: the task
# store (its file and its log), the traces, the workdirs, sockets, the rest.
#
# Run from the repository root after `make examples` (needs strace):
#   internal/cmd/a2aload/syscalls.sh [tasks per run, default 10000]
set -euo pipefail
cd "$(dirname "$0")/../../.."
tasks=${1:-10000}
command -v strace > /dev/null || { echo "syscalls.sh needs strace (apt-get install strace)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=

. internal/cmd/a2aload/gateway.sh
build_gateway
machine
echo "start $(date -u +%FT%TZ), load $(load)"
# The kinds counted as file-system work, as strace names them on this kernel.
kinds='openat|open|creat|mkdir|mkdirat|write|pwrite64|writev|fsync|fdatasync|sync_file_range|unlink|unlinkat|rmdir|rename|renameat|renameat2|stat|lstat|fstat|newfstatat|statx|getdents64|ftruncate|fallocate|linkat|symlinkat|readlinkat|faccessat|faccessat2'
# The hello agent's gateway: the manifest's driver endpoint moved to the replay route.
mkdir -p "$dir/hello"
cp -r examples/capsules/hello/murmur.lock examples/capsules/hello/skills "$dir/hello/"
sed 's#endpoint: http://127.0.0.1:8089#endpoint: http://127.0.0.1:9304#; s/task_acceptance: single/task_acceptance: queue\n  queue_depth: 1000/' \
	examples/capsules/hello/murmur.yaml > "$dir/hello/murmur.yaml"
sed "s#capsule $dir/cap/murmur.yaml#capsule $dir/hello/murmur.yaml#" "$dir/Caddyfile" > "$dir/Caddyfile.hello"
cat >> "$dir/Caddyfile.hello" <<CADDY
http://127.0.0.1:9304 {
	capsule_replay $PWD/examples/cassettes
}
CADDY
# count CAPSULE CADDYFILE TASKS TEXT: the four runs for one capsule.
count() {
	for mode in -same-context ""; do
		for c in 1 200; do
			start "$dir/caddy" "$2"
			"$dir/a2aload" -url http://127.0.0.1:9301/ -text "$4" $mode -clients "$c" -duration 2s > /dev/null # warm up: each client's context opened
			args=()
			for t in /proc/"$pid"/task/*; do args+=(-p "${t##*/}"); done
			strace -f -c -o "$dir/strace.txt" "${args[@]}" 2> "$dir/strace.err" &
			spid=$!
			sleep 1 # strace attaches before the load starts: its own announcement is on stderr only
			out=$("$dir/a2aload" -url http://127.0.0.1:9301/ -text "$4" $mode -clients "$c" -tasks "$3" -duration 10m)
			kill -INT "$spid"
			wait "$spid" 2> /dev/null || true
			stop
			n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
			echo "$1 ${mode:-new-context-per-task} $out"
			awk -v n="$n" -v kinds="^($kinds)$" '
				$NF ~ kinds && $4 ~ /^[0-9]+$/ { per[$NF] = $4 / n; total += $4 } # % seconds usecs/call calls [errors] syscall
				END {
					printf "  file-system calls per task: %.2f (", total / n
					sep = ""
					for (k in per) if (per[k] >= 0.01) { printf "%s%s %.2f", sep, k, per[k]; sep = ", " }
					print ")"
				}' "$dir/strace.txt"
			sed 's/^/    /' "$dir/strace.txt"
		done
	done
}
count wordcount "$dir/Caddyfile" "$tasks" "one two three four five"
count hello "$dir/Caddyfile.hello" "${HELLO_TASKS:-$((tasks / 10))}" "count the words"

# where CAPSULE CADDYFILE TASKS TEXT: where the calls land, warm contexts, 200 clients, each
# call with its file (-y).
where() {
	start "$dir/caddy" "$2"
	"$dir/a2aload" -url http://127.0.0.1:9301/ -text "$4" -same-context -clients 200 -duration 2s > /dev/null
	args=()
	for t in /proc/"$pid"/task/*; do args+=(-p "${t##*/}"); done
	strace -f -y -qq -e trace="$(echo "$kinds" | tr '|' ',')" -o "$dir/calls.txt" "${args[@]}" 2> "$dir/strace.err" &
	spid=$!
	sleep 1
	out=$("$dir/a2aload" -url http://127.0.0.1:9301/ -text "$4" -same-context -clients 200 -tasks "$3" -duration 10m)
	kill -INT "$spid"
	wait "$spid" 2> /dev/null || true
	stop
	n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) completed.*/\1/p')
	echo "where, $1, warm context, 200 clients: $out"
	grep -v 'resumed>' "$dir/calls.txt" | awk -v n="$n" -v dir="$dir" '
		/^[0-9]+ +[a-z0-9_]+\(/ {
			f = "rest"
			p = ""
			if (match($0, /<[^>]*>/)) p = substr($0, RSTART + 1, RLENGTH - 2)
			if ($0 ~ /AT_FDCWD</ && match($0, /"[^"]*"/)) p = substr($0, RSTART + 1, RLENGTH - 2) # the path named, not the cwd
			if (p != "") {
				if (p ~ /tasks\.db(-log)?$/) f = "task store"
				else if (p ~ /trace\.jsonl$/) f = "traces"
				else if (index(p, dir "/work/") == 1) f = "workdirs"
				else if (p ~ /^socket:/ || p ~ /^TCP/) f = "sockets"
			}
			per[f]++; total++
		}
		END {
			printf "  calls per task: %.2f (", total / n
			sep = ""
			for (k in per) { printf "%s%s %.2f", sep, k, per[k] / n; sep = ", " }
			print ")"
		}'
}
where wordcount "$dir/Caddyfile" "$tasks" "one two three four five"
where hello "$dir/Caddyfile.hello" "${HELLO_TASKS:-$((tasks / 10))}" "count the words"
