#!/usr/bin/env bash
# run.sh — runs the official A2A TCK (github.com/a2aproject/a2a-tck) against a running
# capsulegate gateway, on Debian's Python packages only (no pip, no uv, no network).
#
#   A2A_TCK_10_DIR=/path/to/a2a-tck@1.0-dev A2A_TCK_03_DIR=/path/to/a2a-tck@0.3.x \
#       internal/cmd/tck/run.sh SUT_URL [SUT03_URL]
#
# Three runs, each a pytest session in a throw-away copy of the TCK (the copies named by
# the variables are never written to):
#
#   10-jsonrpc    1.0-dev, MUST level, JSON-RPC:  pytest tests/compatibility/ -m must
#                 --sut-host=SUT_URL --transport=jsonrpc   (what `run_tck.py --level must
#                 --transport jsonrpc` runs, without its pytest-html report)
#   10-http_json  the same with --transport=http_json
#   10-grpc       the same with --transport=grpc: the card must list the gRPC interface
#                 (the Caddyfile's `grpc` subdirective) and the server speak h2c
#   03-mandatory  0.3.x, "mandatory" category: pytest tests/mandatory/ --sut-url=SUT03_URL
#                 --test-scope=all -m "mandatory_jsonrpc or mandatory_protocol"
#                 (what `run_tck.py --category mandatory` runs)
#
# SUT_URL is the base the 1.0 TCK appends /.well-known/agent-card.json to (a capsule's
# route prefix, e.g. http://127.0.0.1:8080/agents/wordcount). The 1.0 TCK fetches the
# card without an A2A-Version header and validates it against the strict 1.0 schema, so
# serve the capsule there with `card 1.0`. SUT03_URL (default SUT_URL) must be a host's
# root: the 0.3 TCK reads the card at <scheme>://<host>/.well-known/agent-card.json
# whatever path the URL has, and it needs the mixed card (0.3 fields). The Caddyfile
# beside this script serves the wordcount example both ways (see its header).
#
# Getting the TCK (once; the script downloads nothing):
#   git clone https://github.com/a2aproject/a2a-tck
#   git -C a2a-tck worktree add ../a2a-tck-1.0 origin/1.0-dev   # tested at 357c4a8
#   git -C a2a-tck worktree add ../a2a-tck-0.3 origin/0.3.x     # tested at eb1f804
#
# Debian packages (bookworm; `apt-get install` them once):
#   python3-pytest python3-pytest-asyncio python3-httpx python3-grpcio python3-protobuf
#   python3-jsonschema python3-jinja2 python3-requests python3-openssl python3-yaml
#   python3-dotenv python3-packaging protobuf-compiler libprotobuf-dev
#   protobuf-compiler-grpc libgoogle-common-protos-java
# The TCK's checked-in protobuf code is made by a newer protoc than Debian's
# python3-protobuf accepts, so each copy's a2a_pb2*.py is regenerated here with Debian's
# protoc and grpc_python_plugin; the google.api / google.rpc modules it imports (PyPI's
# googleapis-common-protos, not packaged by Debian) are generated from the .proto files
# inside Debian's proto-google-common-protos jar. Both TCKs ask for a newer pytest than
# Debian's in pyproject.toml (`minversion`), which the copy drops.
#
# Environment:
#   A2A_TCK_10_DIR, A2A_TCK_03_DIR  the TCK checkouts (needed by the runs that use them)
#   TCK_RUNS       which runs, in order (default "10-jsonrpc 10-http_json 10-grpc 03-mandatory")
#   TCK_OUT        keep the logs, JUnit XML, outcome lists and the 1.0 compatibility
#                  reports in this folder (default: a temporary folder, removed at exit)
#   TCK_TIMEOUT    seconds allowed per run (default 1200)
#   TCK_STREAMING_TIMEOUT  passed to the 0.3 TCK as is (its default is 2 s)
#   PYTHON, PROTOC, GRPC_PYTHON_PLUGIN, GOOGLE_COMMON_PROTOS_JAR, PROTO_INCLUDE
#                  the tools (defaults: Debian's /usr/bin/python3, protoc, the plugin on
#                  PATH, /usr/share/java/proto-google-common-protos.jar, /usr/include)
#   TCK_PYTEST_ARGS  extra pytest arguments for every run (word-split), e.g. "-x"
#
# Exit status: 0 when every test that failed is on ALLOWED_FAILURES below, 1 when any
# other test failed or errored, or a run broke (pytest interrupted, no test ran).
set -euo pipefail

# ALLOWED_FAILURES: "<run> <pytest node id>" of each failure that does not fail this
# script. Each is a TCK defect, not a gateway one:
#  - CORE-SEND-003 (1.0-dev): the requirement says an unsupported media type MUST be
#    answered ContentTypeNotSupportedError, but its RequirementSpec in
#    tck/requirements/core_operations.py sets no expected_error, so the parametrized
#    runner expects a success and fails on the (correct) -32005 / 415.
#  - 0.3.x test_rejects_invalid_json_rpc_requests[invalid_request2--32601] and
#    [invalid_request4--32602] send requests without an "id" — JSON-RPC notifications,
#    which JSON-RPC 2.0 §4.1 says get no response — and demand an error object; the
#    gateway answers a notification 204 with no body (docs/reference/a2a.md, JSON-RPC).
ALLOWED_FAILURES=(
	"10-jsonrpc tests/compatibility/core_operations/test_requirements.py::test_must_requirement[CORE-SEND-003-jsonrpc]"
	"10-http_json tests/compatibility/core_operations/test_requirements.py::test_must_requirement[CORE-SEND-003-http_json]"
	"10-grpc tests/compatibility/core_operations/test_requirements.py::test_must_requirement[CORE-SEND-003-grpc]"
	"03-mandatory tests/mandatory/jsonrpc/test_json_rpc_compliance.py::test_rejects_invalid_json_rpc_requests[invalid_request2--32601]"
	"03-mandatory tests/mandatory/jsonrpc/test_json_rpc_compliance.py::test_rejects_invalid_json_rpc_requests[invalid_request4--32602]"
)

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
case "$1" in -h | --help) usage ;; esac
SUT10=$1
SUT03=${2:-$1}

PYTHON=${PYTHON:-/usr/bin/python3}
PROTOC=${PROTOC:-protoc}
GRPC_PYTHON_PLUGIN=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || echo /usr/bin/grpc_python_plugin)}
GOOGLE_COMMON_PROTOS_JAR=${GOOGLE_COMMON_PROTOS_JAR:-/usr/share/java/proto-google-common-protos.jar}
PROTO_INCLUDE=${PROTO_INCLUDE:-/usr/include}
TCK_RUNS=${TCK_RUNS:-10-jsonrpc 10-http_json 10-grpc 03-mandatory}
TCK_TIMEOUT=${TCK_TIMEOUT:-1200}
read -r -a EXTRA_ARGS <<<"${TCK_PYTEST_ARGS:-}"

die() {
	echo "run.sh: $*" >&2
	exit 2
}

# The tools, checked before anything is copied.
command -v "$PROTOC" >/dev/null || die "no $PROTOC: apt-get install protobuf-compiler"
[ -x "$GRPC_PYTHON_PLUGIN" ] || die "no grpc_python_plugin: apt-get install protobuf-compiler-grpc"
[ -f "$GOOGLE_COMMON_PROTOS_JAR" ] || die "no $GOOGLE_COMMON_PROTOS_JAR: apt-get install libgoogle-common-protos-java"
[ -f "$PROTO_INCLUDE/google/protobuf/struct.proto" ] || die "no $PROTO_INCLUDE/google/protobuf/*.proto: apt-get install libprotobuf-dev"
"$PYTHON" - <<'EOF' || die "Python modules missing (see the Debian packages in this script's header)"
import importlib, sys
missing = []
for mod, pkg in [("pytest", "python3-pytest"), ("pytest_asyncio", "python3-pytest-asyncio"),
                 ("httpx", "python3-httpx"), ("grpc", "python3-grpcio"),
                 ("google.protobuf", "python3-protobuf"), ("jsonschema", "python3-jsonschema"),
                 ("jinja2", "python3-jinja2"), ("requests", "python3-requests"),
                 ("OpenSSL", "python3-openssl"), ("yaml", "python3-yaml"),
                 ("dotenv", "python3-dotenv"), ("packaging", "python3-packaging")]:
    try:
        importlib.import_module(mod)
    except ImportError:
        missing.append(pkg)
if missing:
    print("missing: apt-get install " + " ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF

work=$(mktemp -d "${TMPDIR:-/tmp}/capsulegate-tck.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "${TCK_OUT:-}" ]; then
	mkdir -p "$TCK_OUT"
	out=$(cd "$TCK_OUT" && pwd)
else
	out=$work/out
	mkdir -p "$out"
fi

# google.api and google.rpc for Python, from Debian's jar of Google's common protos; a
# native namespace package beside Debian's google.protobuf.
gen=$work/gen
mkdir -p "$work/protos" "$gen"
"$PYTHON" - "$GOOGLE_COMMON_PROTOS_JAR" "$work/protos" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith(("google/api/", "google/rpc/")) and n.endswith(".proto"):
            z.extract(n, sys.argv[2])
EOF
# google.rpc.ErrorInfo (which the 1.0 TCK's gRPC tests read in status details) came to
# error_details.proto in 2021; Debian bookworm's jar predates it: added from its
# published definition when missing.
ed=$work/protos/google/rpc/error_details.proto
if ! grep -q "^message ErrorInfo" "$ed"; then
	printf '\nmessage ErrorInfo {\n  string reason = 1;\n  string domain = 2;\n  map<string, string> metadata = 3;\n}\n' >>"$ed"
fi
(cd "$work/protos" && "$PROTOC" -I. -I"$PROTO_INCLUDE" --python_out="$gen" \
	google/api/annotations.proto google/api/http.proto google/api/client.proto \
	google/api/field_behavior.proto google/api/launch_stage.proto \
	google/rpc/status.proto google/rpc/error_details.proto google/rpc/code.proto)

# A pytest plugin that writes each test's outcome, node id and reason, one a line.
mkdir -p "$work/plugin"
cat >"$work/plugin/tck_outcomes.py" <<'EOF'
import os

_out = None


def _line(outcome, nodeid, why=""):
    why = " ".join(str(why).split())[:300]
    _out.write(f"{outcome}\t{nodeid}\t{why}\n")
    _out.flush()


def _reason(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    lines = str(report.longrepr or "").strip().splitlines()
    return lines[-1] if lines else ""


def pytest_configure(config):
    global _out
    _out = open(os.environ["TCK_OUTCOMES"], "w", encoding="utf-8")


def pytest_collectreport(report):
    if report.failed:
        _line("error", report.nodeid, "collection: " + _reason(report))


def pytest_runtest_logreport(report):
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            _line("xfailed" if report.skipped else "xpassed", report.nodeid, report.wasxfail)
        elif report.skipped:
            _line("skipped", report.nodeid, _reason(report))
        else:
            _line(report.outcome, report.nodeid, _reason(report) if report.failed else "")
    elif report.failed:
        _line("error", report.nodeid, f"{report.when}: " + _reason(report))
    elif report.skipped:
        _line("xfailed" if hasattr(report, "wasxfail") else "skipped", report.nodeid, _reason(report))
EOF

# copy_tck SRC DST: SRC's files without .git, pyproject's minversion dropped.
copy_tck() {
	mkdir -p "$2"
	tar -C "$1" --exclude=.git --exclude=.venv --exclude=__pycache__ --exclude=reports -cf - . | tar -C "$2" -xf -
	sed -i '/^minversion *=/d' "$2/pyproject.toml"
}

# protoc_a2a DIR PROTO OUTDIR: regenerate a2a_pb2.py and a2a_pb2_grpc.py.
protoc_a2a() {
	rm -f "$3"/a2a_pb2.py "$3"/a2a_pb2_grpc.py
	(cd "$1" && "$PROTOC" -I. -I"$work/protos" -I"$PROTO_INCLUDE" \
		--python_out="$3" --grpc_python_out="$3" \
		--plugin=protoc-gen-grpc_python="$GRPC_PYTHON_PLUGIN" "$2")
	# The plugin imports the messages as a top-level module: imported beside the
	# package's own a2a_pb2, its classes would be other classes of the same names, and
	# the TCK's isinstance checks of gRPC answers would fail. The package's module it is.
	if [ -f "$3/__init__.py" ]; then # a package (1.0's specification/generated)
		sed -i 's/^import a2a_pb2 as a2a__pb2$/from . import a2a_pb2 as a2a__pb2/' "$3"/a2a_pb2_grpc.py
	fi
}

# prepare DEST VAR BRANCH TESTS PROTO_DIR OUT_DIR: the TCK checkout named by $VAR (branch
# BRANCH, holding TESTS and PROTO_DIR/a2a.proto) copied to $work/DEST once, its protobuf
# code regenerated into OUT_DIR.
prepare() {
	local dest=$work/$1 src=${!2:-}
	[ -d "$dest" ] && return
	[ -n "$src" ] || die "$2 must name a checkout of a2a-tck branch $3"
	if [ ! -d "$src/$4" ] || [ ! -f "$src/$5/a2a.proto" ]; then
		die "$2=$src is not the $3 TCK (no $4, $5/a2a.proto)"
	fi
	copy_tck "$src" "$dest"
	protoc_a2a "$dest/$5" a2a.proto "$dest/$6"
}

# run_pytest NAME DIR ARGS...: one pytest session in DIR; sets rc.
run_pytest() {
	local name=$1 dir=$2
	shift 2
	echo "== $name: pytest $*" >&2
	rc=0
	(cd "$dir" && env PYTHONPATH="$gen:$work/plugin" PYTHONDONTWRITEBYTECODE=1 \
		TCK_OUTCOMES="$out/$name.outcomes" \
		timeout "$TCK_TIMEOUT" "$PYTHON" -m pytest -p no:cacheprovider -p tck_outcomes \
		--junitxml="$out/$name.xml" -rfE --tb=short "$@" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}) \
		>"$out/$name.log" 2>&1 || rc=$?
}

allowed() { # allowed RUN NODEID
	local e
	for e in "${ALLOWED_FAILURES[@]}"; do [ "$e" = "$1 $2" ] && return 0; done
	return 1
}

bad_runs=()
summary=()
for run in $TCK_RUNS; do
	case "$run" in
	10-jsonrpc | 10-http_json | 10-grpc)
		prepare tck-1.0 A2A_TCK_10_DIR 1.0-dev tests/compatibility specification specification/generated
		run_pytest "$run" "$work/tck-1.0" tests/compatibility/ -m must \
			--sut-host="$SUT10" --transport="${run#10-}" \
			--compatibility-report="$out/$run-compatibility"
		;;
	03-mandatory)
		prepare tck-0.3 A2A_TCK_03_DIR 0.3.x tests/mandatory . tck/grpc_stubs
		run_pytest "$run" "$work/tck-0.3" tests/mandatory/ -m "mandatory_jsonrpc or mandatory_protocol" \
			--sut-url="$SUT03" --test-scope=all
		;;
	*) die "unknown run $run (known: 10-jsonrpc 10-http_json 10-grpc 03-mandatory)" ;;
	esac

	outcomes=$out/$run.outcomes
	touch "$outcomes"
	passed=$(awk -F'\t' '$1 == "passed"' "$outcomes" | wc -l)
	skipped=$(awk -F'\t' '$1 == "skipped" || $1 == "xfailed"' "$outcomes" | wc -l)
	echo
	echo "=== $run: pytest exit $rc; log $out/$run.log"
	echo "--- passed ($passed)"
	awk -F'\t' '$1 == "passed" || $1 == "xpassed" {print "  " $2}' "$outcomes"
	echo "--- skipped ($skipped), by reason (node ids listed for reasons with at most 12)"
	awk -F'\t' '$1 == "skipped" || $1 == "xfailed" {
		if (!($3 in n)) order[++k] = $3
		ids[$3] = ids[$3] "\n    " $2; n[$3]++
	}
	END { for (i = 1; i <= k; i++) { r = order[i]; print "  " n[r] " × " r; if (n[r] <= 12) print substr(ids[r], 2) } }' "$outcomes"
	nfailed=0
	nallowed=0
	failed_ids=()
	echo "--- failed"
	while IFS=$'\t' read -r outcome id why; do
		case "$outcome" in failed | error) ;; *) continue ;; esac
		failed_ids+=("$id")
		if allowed "$run" "$id"; then
			nallowed=$((nallowed + 1))
			echo "  $id  [allowed]  — $why"
		else
			nfailed=$((nfailed + 1))
			echo "  $id  — $why"
		fi
	done <"$outcomes"
	for e in "${ALLOWED_FAILURES[@]}"; do
		[ "${e%% *}" = "$run" ] || continue
		id=${e#* }
		if ! printf '%s\n' ${failed_ids[@]+"${failed_ids[@]}"} | grep -qxF -- "$id"; then
			echo "  note: allowed failure did not fail (passed, skipped or not run): $id"
		fi
	done

	verdict=ok
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
		verdict="broken (pytest exit $rc; see the log's end)"
		tail -n 15 "$out/$run.log" | sed 's/^/  | /'
	elif [ "$passed" -eq 0 ]; then
		verdict="broken (no test passed)"
	elif [ "$nfailed" -gt 0 ]; then
		verdict="FAIL"
	fi
	[ "$verdict" = ok ] || bad_runs+=("$run")
	summary+=("$run: $passed passed, $((nfailed + nallowed)) failed ($nallowed allowed), $skipped skipped — $verdict")
done

echo
echo "=== A2A TCK summary (SUT $SUT10${2:+, 0.3 SUT $SUT03})"
printf '  %s\n' "${summary[@]}"
if [ -n "${TCK_OUT:-}" ]; then echo "  reports in $out"; fi
if [ ${#bad_runs[@]} -gt 0 ]; then
	echo "FAILED: ${bad_runs[*]}"
	exit 1
fi
echo "OK"
