# Berth: the developer entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go modules of the workspace (go.work). tools/ is deliberately outside it.
MODULES := proto sandbox platform nodeagent core runtimebootstrap test
PKGS := $(foreach m,$(MODULES),berth.dev/$(m)/...)
# The modules whose tests run with the race detector; test/ holds the
# black-box suites over real binaries and runs without it (make chaos-race
# runs the fault suite's short form under -race, with race-built
# berth-core and berth-nodeagent: about 6-7 more minutes before the
# 2-minute soak joined the short form, which adds at least those 2
# minutes; past CI's budget on 2 cores).
RACE_MODULES := proto sandbox platform nodeagent core runtimebootstrap
RACE_PKGS := $(foreach m,$(RACE_MODULES),berth.dev/$(m)/...)
BLACKBOX_PKGS := berth.dev/test/...
# CHAOS_PKG is the fault suite: make test runs its short form beside
# everything else, since its scenarios mostly wait (timeouts, restarts).
# Its short form includes a 2-minute soak (TestSoak's soakShort), which
# takes it past go test's default 10-minute timeout under CI's load:
# CHAOS_TIMEOUT bounds it instead (a hung scenario still fails the run).
CHAOS_PKG := berth.dev/test/chaos
CHAOS_TIMEOUT := 25m

BIN := $(CURDIR)/.bin
export PATH := $(BIN):$(PATH)

# Addresses of the test services, written by scripts/test-services.
-include .run/test-services.env
export BERTH_TEST_DOCKER_HOST BERTH_TEST_DATABASE_URL BERTH_TEST_RUNTIME_IMAGE BERTH_TEST_MSB

GO_TEST_FLAGS ?= -count=1

TOOLS := buf protoc-gen-go protoc-gen-go-grpc grpcurl sqlc golangci-lint nfpm
TOOL_PKG_buf := github.com/bufbuild/buf/cmd/buf
TOOL_PKG_protoc-gen-go := google.golang.org/protobuf/cmd/protoc-gen-go
TOOL_PKG_protoc-gen-go-grpc := google.golang.org/grpc/cmd/protoc-gen-go-grpc
TOOL_PKG_grpcurl := github.com/fullstorydev/grpcurl/cmd/grpcurl
TOOL_PKG_sqlc := github.com/sqlc-dev/sqlc/cmd/sqlc
TOOL_PKG_golangci-lint := github.com/golangci/golangci-lint/v2/cmd/golangci-lint
TOOL_PKG_nfpm := github.com/goreleaser/nfpm/v2/cmd/nfpm

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-34s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/%: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -o $@ $(TOOL_PKG_$*)

# nfpm has a module of its own (tools/nfpm/go.mod): in tools/go.mod its
# dependencies would move golangci-lint's (spf13/viper 1.12 to 1.21).
$(BIN)/nfpm: tools/nfpm/go.mod tools/nfpm/go.sum
	@mkdir -p $(BIN)
	cd tools/nfpm && GOWORK=off go build -o $@ $(TOOL_PKG_nfpm)

.PHONY: tools
tools: $(addprefix $(BIN)/,$(TOOLS)) ## Build the pinned tools (tools/go.mod; nfpm: tools/nfpm/go.mod) into .bin/

GENERATORS := $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/sqlc

# generate_in runs every generator with $(1) as the repository root: the
# checkout (make generate) or a temporary copy of it (make verify-generated).
# scripts/gen-clients (the Python and TypeScript clients of the admin API)
# uses the checkout's clients/typescript/node_modules in both, so a copy
# of the tree needs no npm install of its own.
generate_in = cd $(1) && find proto -name '*.pb.go' -delete && buf generate && \
	rm -f core/store/db/db.go core/store/db/models.go core/store/db/*.sql.go && \
	(cd core/store && $(BIN)/sqlc generate && go run ./internal/gendecorate) && \
	go run berth.dev/sandbox/docker/internal/seccompgen -out deploy/runtime && \
	go run berth.dev/core/cmd/specification-contract -write && \
	go run berth.dev/core/cmd/provider-artifacts -write && \
	BERTH_CLIENTS_NODE_MODULES=$(CURDIR)/clients/typescript/node_modules scripts/gen-clients

.PHONY: generate
generate: $(GENERATORS) ## Regenerate committed code (buf, sqlc, the store's observed views in core/store/storeobs, runtime seccomp profile, the provider projections in deploy/projections, the Python and TypeScript clients in clients/)
	$(call generate_in,$(CURDIR))

# The static checks, after etcd's verify-* targets: each runs alone and
# `make verify` runs them all. None of them writes into the checkout except
# its gitignored tool caches, .bin/ and clients/typescript/node_modules/
# (scripts/gen-clients provisions the latter with npm ci).
.PHONY: verify
verify: verify-gofmt verify-vet verify-lint verify-tidy verify-generated verify-clients verify-buf verify-depguard-selftest verify-systemd verify-docs ## Every static check below (each verify-* target also runs alone)

.PHONY: lint
lint: verify ## Alias of verify

.PHONY: verify-gofmt
verify-gofmt: ## gofmt: no Go file needs reformatting
	@unformatted=$$(gofmt -l $(MODULES) tools); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## go vet on every package of the workspace
	go vet $(PKGS)

.PHONY: verify-lint
verify-lint: $(BIN)/golangci-lint ## golangci-lint over every module (.golangci.yml: staticcheck, errorlint, depguard's dependency arrows, ...)
	golangci-lint run $(foreach m,$(MODULES),./$(m)/...)

.PHONY: verify-tidy
verify-tidy: ## Every go.mod (the modules, tools/ and tools/nfpm/) is tidy: go mod tidy -diff
	@for m in $(MODULES) tools tools/nfpm; do (cd $$m && GOWORK=off go mod tidy -diff >/dev/null) || \
		{ echo "$$m/go.mod is not tidy: run (cd $$m && GOWORK=off go mod tidy)"; exit 1; }; done

.PHONY: verify-generated
verify-generated: $(GENERATORS) ## Regenerate into a temporary copy of the tree; fail when committed generated code differs
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		scripts/copy-tree "$$tmp"; \
		git -C "$$tmp" init -q && git -C "$$tmp" add -A; \
		( $(call generate_in,"$$tmp") ) >/dev/null; \
		stale=$$(git -C "$$tmp" diff --name-status; git -C "$$tmp" ls-files --others --exclude-standard | sed 's/^/new\t/'); \
		if [ -n "$$stale" ]; then echo "$$stale"; git -C "$$tmp" --no-pager diff --stat; \
			echo "generated code is stale: run 'make generate' and commit"; exit 1; fi

# verify-clients: the committed clients of clients/ compile as they are
# (make generate / verify-generated keep them in step with the .proto files).
.PHONY: verify-clients
verify-clients: ## The TypeScript client and its example type-check (tsc --noEmit); the Python helper and example byte-compile
	scripts/gen-clients --provision-only
	cd clients/typescript && node_modules/.bin/tsc --noEmit
	cd clients/python && /usr/bin/python3 -B -c 'import pathlib; [compile(p.read_text(), str(p), "exec", dont_inherit=True) for p in sorted(pathlib.Path(".").rglob("*.py"))]'

.PHONY: check-generated
check-generated: verify-generated ## Alias of verify-generated

# buf breaking compares with the merge base of HEAD and BREAKING_BASE (main),
# or with HEAD~1 when that is HEAD itself (on main, as in CI's clean clone).
# No base is a failure, never a skip: a comparison that did not run would
# look exactly like one that passed.
BREAKING_BASE ?= main

.PHONY: verify-buf
verify-buf: $(BIN)/buf ## buf lint, buf format, buf breaking against the merge base with main (HEAD~1 on main)
	buf lint
	buf format --diff --exit-code
	@head=$$(git rev-parse HEAD); \
		base=$$(git merge-base HEAD '$(BREAKING_BASE)' 2>/dev/null) || \
			{ echo "verify-buf: HEAD and $(BREAKING_BASE) have no merge base (no branch $(BREAKING_BASE)?): nothing to run buf breaking against"; exit 1; }; \
		if [ "$$base" = "$$head" ]; then \
			base=$$(git rev-parse -q --verify 'HEAD~1^{commit}') || \
				{ echo "verify-buf: HEAD is on $(BREAKING_BASE) and has no parent commit (shallow clone?): nothing to run buf breaking against"; exit 1; }; \
		fi; \
		git cat-file -e "$$base:buf.yaml" 2>/dev/null || \
			{ echo "verify-buf: the base $$base has no buf.yaml: nothing to run buf breaking against"; exit 1; }; \
		echo "buf breaking --against .git#ref=$$base"; buf breaking --against ".git#ref=$$base"

.PHONY: verify-depguard-selftest
verify-depguard-selftest: $(BIN)/golangci-lint ## Prove the depguard rules refuse wrong imports (planted in a temporary copy of the tree)
	scripts/verify-depguard-selftest

.PHONY: verify-docs
verify-docs: ## Every hand-written Go package has a doc.go with its rules (at most 60 lines); README.md's, core/README.md's and docs/'s links resolve
	scripts/verify-docs

.PHONY: verify-systemd
verify-systemd: ## systemd-analyze verify (no warning allowed) and an exposure bound (systemd-analyze security) on deploy/systemd's units
	scripts/verify-systemd

.PHONY: test
test: verify ## Everything CI runs: verify, every test of proto, sandbox, platform, nodeagent, core, runtimebootstrap with -race, then the black-box suites (test/; the fault suite's short form, a 2-minute soak included, runs beside all of it from the start)
	@chaos_log=$$(mktemp); trap 'rm -f "$$chaos_log"' EXIT; status=0; \
	echo "go test $(GO_TEST_FLAGS) -timeout $(CHAOS_TIMEOUT) $(CHAOS_PKG) (in the background from the start: it waits more than it computes; its output follows)"; \
	go test $(GO_TEST_FLAGS) -timeout $(CHAOS_TIMEOUT) $(CHAOS_PKG) >"$$chaos_log" 2>&1 & chaos=$$!; \
	echo "go test -race $(GO_TEST_FLAGS) $(RACE_PKGS)"; \
	go test -race $(GO_TEST_FLAGS) $(RACE_PKGS) || status=1; \
	others=$$(go list $(BLACKBOX_PKGS) | grep -vx '$(CHAOS_PKG)'); \
	echo "go test $(GO_TEST_FLAGS) $(BLACKBOX_PKGS) but $(CHAOS_PKG)"; \
	go test $(GO_TEST_FLAGS) $$others || status=1; \
	wait $$chaos || status=1; \
	cat "$$chaos_log"; \
	exit $$status

.PHONY: chaos-race
chaos-race: ## The fault suite's short form (each scenario once) under -race, berth-core and berth-nodeagent built with -race too: a race report in the harness or in any process's log fails it
	go test -race $(GO_TEST_FLAGS) -timeout 40m berth.dev/test/chaos/

.PHONY: test-short
test-short: ## Unit tests only (-short; -race outside test/): tests that need a service skip under -short
	go test -short -race $(GO_TEST_FLAGS) $(RACE_PKGS)
	go test -short $(GO_TEST_FLAGS) $(BLACKBOX_PKGS)

.PHONY: check-sandbox-provider-contract
check-sandbox-provider-contract: ## The shared provider contract suite and its validation tables
	go test $(GO_TEST_FLAGS) berth.dev/sandbox/...

# The native microsandbox suite boots microVMs: it needs a host with
# hardware virtualization (vmx/svm) and /dev/kvm, root (it builds the
# runtime image archive unless BERTH_TEST_MSB_IMAGE names one) and the
# pinned msb in BERTH_TEST_MSB (scripts/test-services writes it to
# .run/test-services.env). sandbox/microsandbox/README.md says how to
# install msb; the suite's gate is in sandbox/microsandbox/acceptance_test.go.
.PHONY: check-microsandbox-provider
check-microsandbox-provider: ## The native microsandbox acceptance suite (opt-in: BERTH_TEST_MICROSANDBOX=1; needs VT-x/AMD-V, /dev/kvm, root and BERTH_TEST_MSB): the runtime image's msb digest; create, isolation and limits from inside, Kill (checkpoints are declared unsupported: that case says so); a Turn through the Runtime with the real Core and node agent
	go test $(GO_TEST_FLAGS) -v -run '^TestRuntimeImageForMicrosandbox$$' berth.dev/test/dist/
	BERTH_TEST_MICROSANDBOX=1 go test $(GO_TEST_FLAGS) -v -timeout 30m -run '^TestAcceptance' berth.dev/sandbox/microsandbox/
	BERTH_TEST_MICROSANDBOX=1 go test $(GO_TEST_FLAGS) -v -timeout 30m -run '^TestMicrosandboxTurnThroughTheRuntime$$' berth.dev/test/microsandbox/

# The live E2B acceptance runs against a real E2B account, so it is
# opt-in and never part of make test or CI: the key and the template come
# from the environment only (export E2B_API_KEY="$$(cat KEYFILE)"; a
# variable on make's command line would be in ps and in the shell's
# history, so it is refused). The output is held until the run ends and
# shown only when it does not contain the key (grep reads the key from a
# file descriptor, never from its arguments); a skip counts as a failure.
# sandbox/e2b/README.md and deploy/e2b/README.md say what it proves.
.PHONY: check-e2b-provider
check-e2b-provider: ## The live E2B acceptance (opt-in: E2B_API_KEY and E2B_TEMPLATE, the Runtime template of deploy/e2b, in the environment, never on the command line): create from the template, its Runtime layout inside, GetInfo, Renew, RunCommand, Kill and absence
	@if [ "$(origin E2B_API_KEY)" = "command line" ]; then \
		echo "check-e2b-provider: E2B_API_KEY was given on make's command line, where ps and the shell's history show it: export it from a file instead (export E2B_API_KEY=\"\$$(cat ~/.e2b-api-key)\")"; exit 2; fi
	@if [ -z "$${E2B_API_KEY:-}" ] || [ -z "$${E2B_TEMPLATE:-}" ]; then \
		echo "check-e2b-provider: nothing ran: it needs E2B_API_KEY (an E2B team's API key, exported from a file: export E2B_API_KEY=\"\$$(cat ~/.e2b-api-key)\") and E2B_TEMPLATE (the Runtime template built from deploy/e2b, e.g. berth-runtime-1-2-3) in the environment"; exit 1; fi
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; status=0; \
		echo "go test $(GO_TEST_FLAGS) -v -timeout 10m -run '^TestLiveE2B$$' berth.dev/sandbox/e2b/ (output shown when it ends; E2B_TEMPLATE=$$E2B_TEMPLATE)"; \
		go test $(GO_TEST_FLAGS) -v -timeout 10m -run '^TestLiveE2B$$' berth.dev/sandbox/e2b/ >"$$out" 2>&1 || status=1; \
		if grep -qF -f <(printf '%s\n' "$$E2B_API_KEY") "$$out"; then \
			echo "check-e2b-provider: the test's output contains the API key, so it is not shown: that is a bug of the adapter or the test"; exit 1; fi; \
		cat "$$out"; \
		grep -q '^--- PASS: TestLiveE2B' "$$out" || { echo "check-e2b-provider: TestLiveE2B did not pass"; exit 1; }; \
		exit $$status

.PHONY: services
services: ## Provision and start the test services (Docker Engine, PostgreSQL)
	scripts/test-services up

.PHONY: services-down
services-down: ## Stop the test services started by scripts/test-services
	scripts/test-services down

.PHONY: runtime-image
runtime-image: ## Build the runtime image offline and load it into the test engine as berth-runtime:dev
	scripts/build-runtime-image

# Where make dist writes; the dist test builds into a temporary folder.
DIST ?= $(CURDIR)/dist

.PHONY: dist
dist: $(BIN)/nfpm ## Release for linux/amd64 into dist/ (scripts/dist): static binaries, the runtime image archive, the seccomp profile, example configs, systemd units, a tar.gz per component, berth-core and berth-nodeagent .deb (nfpm); needs root
	NFPM=$(BIN)/nfpm scripts/dist "$(DIST)"

.PHONY: e2e
e2e: ## Black-box suites over real processes and services (test/: node protocol, chaos in its shortened form, services)
	go test $(GO_TEST_FLAGS) -v berth.dev/test/...

CHAOS_RUNS ?= 3
DURATION ?= 10m
CHAOS_REPORT := $(CURDIR)/.run/chaos-report.txt

.PHONY: chaos
chaos: ## Fault-injection suite: every scenario CHAOS_RUNS times (default 3); table in .run/chaos-report.txt, log in .run/chaos.log
	@mkdir -p .run && rm -f $(CHAOS_REPORT)
	@set +e; CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_REPORT=$(CHAOS_REPORT) go test $(GO_TEST_FLAGS) -timeout 0 -v berth.dev/test/chaos/ 2>&1 \
		| tee .run/chaos.log | grep --line-buffered -E '^(--- |ok|FAIL)|fault:|recovery|violated|I5:'; \
		status=$${PIPESTATUS[0]}; cat $(CHAOS_REPORT) 2>/dev/null; echo "full log: .run/chaos.log"; exit $$status

.PHONY: soak
soak: ## Mixed create/delete workload with random faults for DURATION (default 10m; make test runs it for 2m): operations, faults, violations, unexplained refusals, leaks
	@mkdir -p .run && rm -f $(CHAOS_REPORT)
	@set +e; CHAOS_SOAK_DURATION=$(DURATION) CHAOS_REPORT=$(CHAOS_REPORT) go test $(GO_TEST_FLAGS) -timeout 0 -v -run '^TestSoak$$' berth.dev/test/chaos/ 2>&1 \
		| tee .run/soak.log | grep --line-buffered -E '^(--- |ok|FAIL)|fault:|violated|^soak '; \
		status=$${PIPESTATUS[0]}; echo "full log: .run/soak.log"; exit $$status

BERTH_BENCH_SAMPLES ?= 20
.PHONY: bench
bench: ## P1-P4, P7 (checkpoint suspend and resume) and P8 (suspension and wake through Core) and F1 (files through Core and the Runtime) against Engine API baselines in the same run, P6 failure detection, P8c idle-to-suspended, P9 standby takeover after a SIGKILL and P10 admin calls refused across a planned handover, BERTH_BENCH_SAMPLES each (default 20; P6 at most 5): one table, also .run/bench.json; then Core's RSS and an authenticated call's latency under hostile floods against a quiet Core (needs the test services)
	BERTH_BENCH_SAMPLES=$(BERTH_BENCH_SAMPLES) BERTH_BENCH_JSON=$(CURDIR)/.run/bench.json \
		go test -run '^$$' -bench '^BenchmarkBerth$$' -benchtime 1x -count=1 -timeout 0 berth.dev/test/bench/
	HOSTILE_MEASURE=1 go test -v -count=1 -run '^TestMeasureHostileLoad$$' berth.dev/test/hostile/ | grep -v '^=== RUN'

BERTH_K0_SAMPLES ?= 5
.PHONY: bench-fork-copy
bench-fork-copy: ## K0 (issue 33): copy a 100 MB volume pair by the engine's archive endpoints, by a helper container's cp -a, and by one helper into 10 targets, BERTH_K0_SAMPLES each (default 5; needs the test services)
	BERTH_BENCH_SAMPLES=$(BERTH_K0_SAMPLES) \
		go test -run '^$$' -bench '^BenchmarkForkCopy$$' -benchtime 1x -count=1 -timeout 0 berth.dev/test/bench/

.PHONY: bench-fork
bench-fork: ## K1 and K2 (issue 33): fork a 100 MB Session into 10 until all are admitted, the source's pause from engine events (BERTH_BENCH_SAMPLES, default 5), then one fork into 100 with 4 node agents; also .run/bench-fork.json (needs the test services)
	go test -run '^$$' -bench '^BenchmarkFork$$' -benchtime 1x -count=1 -timeout 0 berth.dev/test/bench/

.PHONY: bench-scale
bench-scale: ## P5 scale: 1,000 simulated node agents (real mTLS node protocol, in-memory adapter) against berth-core and PostgreSQL holding 100,000 allocations; one table, also .run/scale.json (BERTH_SCALE_NODES, _ALLOCATIONS, _CREATES, _CLIENTS, _PROJECTS)
	BERTH_SCALE_JSON=$(CURDIR)/.run/scale.json \
		go test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count=1 -timeout 0 berth.dev/test/scale/

FUZZTIME ?= 1m
FUZZ_TARGETS := \
	berth.dev/runtimebootstrap:FuzzDecode \
	berth.dev/sandbox/strictjson:FuzzDecode \
	berth.dev/sandbox/docker:FuzzDecodeNodeConfig \
	berth.dev/platform/nodewire:FuzzInfoFromWire \
	berth.dev/nodeagent:FuzzDecodeConfig \
	berth.dev/runtimebootstrap/turnexec:FuzzPrepare \
	berth.dev/core/admin:FuzzAdminServerDecoding \
	berth.dev/core/turnadmin:FuzzSubmitRequest \
	berth.dev/core/gateway:FuzzResultFromWire

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 1m; make fuzz FUZZTIME=10m)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

.PHONY: up
up: ## Build, provision and start Core + two node agents, create a Session and run a Turn; leaves it running
	scripts/berth-up up

.PHONY: down
down: ## Stop the stack `make up` started and remove its sandboxes
	scripts/berth-up down
