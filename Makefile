# capsulegate — `make run` builds everything and serves the examples; `make test` runs
# every test. Both work on a fresh clone with Go and a C compiler (for -race).

SHELL     := /bin/bash
GO        ?= go
BIN       := bin
CADDY     := $(BIN)/caddy
REGISTRY  := $(CURDIR)/examples/registry
# Every parser of outside input runs at least two minutes; some get more below.
FUZZTIME  ?= 2m
# FuzzREST decodes whole HTTP+JSON requests and runs them: it gets five minutes.
FUZZTIME_REST ?= 5m
FUZZTIME_GRPC ?= 5m
# FuzzInboundParts decodes, admits and renders back the parts of every binding: two minutes.
FUZZTIME_PARTS ?= 2m
# FuzzNexusListing and FuzzOCIManifest decode what remote registries answer: two minutes each.
FUZZTIME_REGISTRY ?= 2m
# JWT parsing and verification faces every caller: at least 2 minutes (issue: edge security).
FUZZTIME_JWT ?= 2m

# Wasm guests: every main package whose first line is `//go:build wasip1`. Test guests
# build into bin/guests/; example guests build where the examples need them.
GUEST_SRCS := $(shell grep -rl --include=main.go '^//go:build wasip1' internal/testkit/testguests 2>/dev/null)
GUEST_DIRS := $(patsubst %/main.go,%,$(GUEST_SRCS))
GUEST_BUILD = GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath
SDK_SRCS := $(shell find wit/guest -name '*.go')
DRIVERS := anthropic-messages openai-chat claude-code codex
HOOKS := policy-hook audit-hook
EXAMPLE_WASM := examples/artifacts/wordcount/wordcount.wasm examples/capsules/wordcount/capsule.wasm \
	examples/capsules/conformance/capsule.wasm examples/artifacts/conformance-io/conformance-io.wasm \
	$(foreach d,$(DRIVERS),examples/drivers/$(d)/artifact/$(d).wasm) \
	$(foreach h,$(HOOKS),examples/artifacts/$(h)/$(h).wasm)
WORK_ROOT := $(CURDIR)/bin/work
# CADDY_FLAGS are xcaddy's own (v0.4.5 builds with -trimpath and these tags): built the
# same way, bin/caddy, the end-to-end tests' binary (e2e/main_test.go) and `make gateway`
# share the compiled Caddy packages instead of compiling them once each.
CADDY_FLAGS := -trimpath -tags nobadger,nomysql,nopgx

.PHONY: all run harnesses demo test jsdeps watdeps caddy helper gateway guests publish examples fuzz bench vet fmt-check check-tracked clean

all: guests examples

## caddy: build Caddy with capsulegate's modules into bin/caddy from cmd/caddy (offline,
## from the module cache; what every other target uses), and next to it the sandbox
## helper bin/capsulegate-sandbox, which shell tool commands start (docs/sandbox.md)
caddy: helper
	$(GO) build $(CADDY_FLAGS) -o $(CADDY) ./cmd/caddy

## helper: build the sandbox helper alone into bin/capsulegate-sandbox
helper:
	$(GO) build -o $(BIN)/capsulegate-sandbox ./cmd/capsulegate-sandbox

## gateway: build a custom Caddy with xcaddy v0.4.5 from xcaddy.json (Caddy version +
## this module) into bin/caddy-xcaddy, as an operator would for their own gateway, with
## the sandbox helper next to it (bin/capsulegate-sandbox)
XCADDY_CADDY := $(shell sed -n 's/.*"caddy_version": *"\([^"]*\)".*/\1/p' xcaddy.json)
gateway: helper
	@mkdir -p $(BIN)
	$(GO) run github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5 build $(XCADDY_CADDY) \
		--with github.com/capsulegate/capsulegate@v0.0.0=$(CURDIR) --output $(BIN)/caddy-xcaddy

## guests: build every wasm guest from source (example guests where the examples need
## them, test guests into bin/guests/), then pack every example artifact and publish it
## into examples/registry
guests: caddy $(EXAMPLE_WASM)
	@for d in $(GUEST_DIRS); do \
		out=$(BIN)/guests/$$(basename $$d).wasm; mkdir -p $(BIN)/guests; \
		$(GUEST_BUILD) -o $$out ./$$d || exit 1; \
	done
	@$(MAKE) --no-print-directory publish

examples/artifacts/wordcount/wordcount.wasm: $(wildcard examples/guests/wordcount/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/wordcount

examples/capsules/wordcount/capsule.wasm: $(wildcard examples/guests/wordcount-capsule/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/wordcount-capsule

examples/capsules/conformance/capsule.wasm: $(wildcard examples/guests/conformance-capsule/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/conformance-capsule

examples/artifacts/conformance-io/conformance-io.wasm: $(wildcard examples/guests/conformance-io/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/conformance-io

# The example hooks: each examples/guests/<hook> builds into its artifact folder.
examples/artifacts/policy-hook/policy-hook.wasm: $(wildcard examples/guests/policy-hook/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/policy-hook

examples/artifacts/audit-hook/audit-hook.wasm: $(wildcard examples/guests/audit-hook/*.go) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/guests/audit-hook

DRIVER_SRCS := $(wildcard examples/drivers/*/*.go examples/drivers/*/*/*.go)
examples/drivers/anthropic-messages/artifact/anthropic-messages.wasm: $(DRIVER_SRCS) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/drivers/anthropic-messages

examples/drivers/openai-chat/artifact/openai-chat.wasm: $(DRIVER_SRCS) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/drivers/openai-chat

# The process drivers (docs/reference/process-drivers.md "Shipped drivers").
examples/drivers/claude-code/artifact/claude-code.wasm: $(DRIVER_SRCS) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/drivers/claude-code

examples/drivers/codex/artifact/codex.wasm: $(DRIVER_SRCS) $(SDK_SRCS)
	$(GUEST_BUILD) -o $@ ./examples/drivers/codex

## publish: pack every example artifact and publish it into examples/registry
publish: caddy $(EXAMPLE_WASM)
	@mkdir -p $(BIN)/artifacts $(REGISTRY)
	@for d in examples/artifacts/*/ examples/drivers/*/artifact/; do \
		n=$$(echo $$d | tr / _); \
		$(CADDY) capsule pack $$d --output $(BIN)/artifacts/$$n.mur.zip || exit 1; \
		$(CADDY) capsule publish $(BIN)/artifacts/$$n.mur.zip --registry $(REGISTRY) || exit 1; \
	done

## examples: publish the example artifacts and install (pin) the example capsules
examples: publish
	@for m in examples/capsules/*/murmur.yaml; do \
		$(CADDY) capsule install $$m --registry $(REGISTRY) || exit 1; \
	done

## run: build everything, verify the example capsules, and serve them with
## Caddyfile.example on 127.0.0.1:8080 (A2A; the conformance capsule on 8110 and 8103),
## the replay provider on 127.0.0.1:8089 and metrics at /metrics — no key, no network.
## The Codex capsule is served when `make harnesses` could install the Codex CLI (npm);
## without it, make says so and serves the rest. Ctrl-C stops it.
CODEX_VERSION := 0.169.0
HARNESSES := $(BIN)/harnesses
CODEX_BIN := $(HARNESSES)/node_modules/.bin/codex
run: examples harnesses
	@for m in examples/capsules/*/murmur.yaml; do \
		$(CADDY) capsule verify $$m --registry $(REGISTRY) || exit 1; \
	done
	@echo "serving: curl -s http://127.0.0.1:8080/agents/hello/.well-known/agent-card.json (README has the A2A calls)"
	@if [ -x $(CODEX_BIN) ]; then \
		PATH="$(CURDIR)/$(HARNESSES)/node_modules/.bin:$$PATH" $(CADDY) run --config Caddyfile.example --adapter caddyfile; \
	else \
		echo "make run: the Codex CLI is not installed (make harnesses needs npm), so the Codex capsule is left out"; \
		sed '/# codex-begin/,/# codex-end/d' Caddyfile.example | cat -s > $(BIN)/Caddyfile.run && \
		$(CADDY) run --config $(BIN)/Caddyfile.run --adapter caddyfile; \
	fi

## harnesses: install the Codex CLI the Codex example capsule drives (@openai/codex, the
## version its driver was tested with) into bin/harnesses with npm; without npm, say so
harnesses:
	@if [ -x $(CODEX_BIN) ] && $(CODEX_BIN) --version 2>/dev/null | grep -q '$(CODEX_VERSION)'; then :; \
	elif command -v npm >/dev/null; then \
		mkdir -p $(HARNESSES) && npm install --prefix $(HARNESSES) --no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION) || \
		echo "make harnesses: npm could not install @openai/codex@$(CODEX_VERSION); the Codex capsule will be left out"; \
	else \
		echo "make harnesses: npm is not installed; the Codex capsule will be left out (install Node.js and npm to serve it)"; \
	fi

## demo: run each example capsule once from the command line (no gateway): the script
## capsule, then the hello agent against a replay server
REPLAY_ADDR := 127.0.0.1:8089
demo: examples
	$(CADDY) capsule run examples/capsules/wordcount/murmur.yaml --registry $(REGISTRY) --work-root $(WORK_ROOT) \
		--task "Count the words of this sentence, please."
	@$(CADDY) capsule replay examples/cassettes --listen $(REPLAY_ADDR) & pid=$$!; \
	trap 'kill $$pid 2>/dev/null' EXIT; \
	for i in $$(seq 1 100); do (echo > /dev/tcp/$(subst :,/,$(REPLAY_ADDR))) 2>/dev/null && break; sleep 0.1; done; \
	$(CADDY) capsule run examples/capsules/hello/murmur.yaml --registry $(REGISTRY) --work-root $(WORK_ROOT) \
		--task "Say hello, then count the words in: the quick brown fox"

## test: no tracked build artifacts, formatting, vet and every test with the race detector;
## the gateway is built first (caddy), so e2e's TestMain, which builds the same binary,
## finds it compiled in the build cache instead of compiling Caddy inside its test time
test: check-tracked fmt-check vet jsdeps watdeps caddy
	$(GO) test -race -count=1 ./...

## jsdeps: the official A2A JS SDKs for the client tests (0.3 in a2a/testdata/jsclient,
## 1.x in e2e/testdata/jsparts), installed once before the test packages run in parallel
jsdeps:
	@for d in a2a/testdata/jsclient e2e/testdata/jsparts; do \
		if command -v node >/dev/null && [ ! -f $$d/node_modules/@a2a-js/sdk/package.json ]; then \
			(cd $$d && npm ci --no-audit --no-fund) || exit 1; fi; \
	done

## watdeps: jco, which assembles the wasm text-format test guests (internal/testkit/watbuild),
## installed once into the guest cache before the test packages that use it run in parallel
watdeps:
	@if command -v node >/dev/null; then $(GO) test -count=1 -run '^TestBuildCachesByContent$$' ./internal/testkit/watbuild >/dev/null; fi

## check-tracked: fail when git tracks a compiled binary or build artifact (ELF, Mach-O,
## PE, wasm, *.zip, *.mur.zip, *.test), naming each and the fix
check-tracked:
	@.ci/check-tracked

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## fuzz: run every fuzz target for FUZZTIME each (default 2m; FuzzREST FUZZTIME_REST and FuzzGRPC FUZZTIME_GRPC, 5m;
## the parts and registry decoders FUZZTIME_PARTS and FUZZTIME_REGISTRY, JWTs FUZZTIME_JWT, 2m)
fuzz:
	$(GO) test ./manifest -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./netpolicy -run '^$$' -fuzz '^FuzzParseRule$$' -fuzztime $(FUZZTIME)
	$(GO) test ./registry -run '^$$' -fuzz '^FuzzOpenArchive$$' -fuzztime $(FUZZTIME)
	$(GO) test ./registry -run '^$$' -fuzz '^FuzzParseLock$$' -fuzztime $(FUZZTIME)
	$(GO) test ./registry -run '^$$' -fuzz '^FuzzNexusListing$$' -fuzztime $(FUZZTIME_REGISTRY)
	$(GO) test ./registry -run '^$$' -fuzz '^FuzzOCIManifest$$' -fuzztime $(FUZZTIME_REGISTRY)
	$(GO) test ./runtime/wasm -run '^$$' -fuzz '^FuzzExportGlobals$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/wasm -run '^$$' -fuzz '^FuzzInterruptRewrite$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/wasm/component -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/wasm/murmur -run '^$$' -fuzz '^FuzzCompileComponent$$' -fuzztime $(FUZZTIME)
	$(GO) test ./a2a -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./a2a -run '^$$' -fuzz '^FuzzDecodeJournal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./a2a -run '^$$' -fuzz '^FuzzREST$$' -fuzztime $(FUZZTIME_REST)
	$(GO) test ./a2a -run '^$$' -fuzz '^FuzzInboundParts$$' -fuzztime $(FUZZTIME_PARTS)
	$(GO) test ./a2a -run '^$$' -fuzz '^FuzzGRPC$$' -fuzztime $(FUZZTIME_GRPC)
	$(GO) test ./taskdb -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./edgeauth -run '^$$' -fuzz '^FuzzJWT$$' -fuzztime $(FUZZTIME_JWT)
	$(GO) test ./edgeauth -run '^$$' -fuzz '^FuzzBearerToken$$' -fuzztime $(FUZZTIME)
	$(GO) test ./edgepolicy -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./netpolicy -run '^$$' -fuzz '^FuzzCanonicalHost$$' -fuzztime $(FUZZTIME)
	$(GO) test ./taskdb -run '^$$' -fuzz '^FuzzDecodePin$$' -fuzztime $(FUZZTIME)
	$(GO) test ./wit/abi -run '^$$' -fuzz '^FuzzLift$$' -fuzztime $(FUZZTIME)
	$(GO) test ./wit/abi -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runtime/wasm -run '^$$' -fuzz '^FuzzGuestRoundTrip$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/jsontext -run '^$$' -fuzz '^FuzzAppendString$$' -fuzztime $(FUZZTIME)

## bench: the benchmarks quoted in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN) $(REGISTRY) examples/capsules/*/murmur.lock $(EXAMPLE_WASM)
