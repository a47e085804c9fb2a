# Berth: the developer entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go modules of the workspace (go.work). tools/ is deliberately outside it.
MODULES := proto sandbox nodeagent core runtimebootstrap test
PKGS := $(foreach m,$(MODULES),berth.dev/$(m)/...)

BIN := $(CURDIR)/.bin
export PATH := $(BIN):$(PATH)

# Addresses of the test services, written by scripts/test-services.
-include .run/test-services.env
export BERTH_TEST_DOCKER_HOST BERTH_TEST_DATABASE_URL BERTH_TEST_RUNTIME_IMAGE

GO_TEST_FLAGS ?= -count=1

TOOLS := buf protoc-gen-go protoc-gen-go-grpc grpcurl sqlc golangci-lint
TOOL_PKG_buf := github.com/bufbuild/buf/cmd/buf
TOOL_PKG_protoc-gen-go := google.golang.org/protobuf/cmd/protoc-gen-go
TOOL_PKG_protoc-gen-go-grpc := google.golang.org/grpc/cmd/protoc-gen-go-grpc
TOOL_PKG_grpcurl := github.com/fullstorydev/grpcurl/cmd/grpcurl
TOOL_PKG_sqlc := github.com/sqlc-dev/sqlc/cmd/sqlc
TOOL_PKG_golangci-lint := github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-34s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/%: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -o $@ $(TOOL_PKG_$*)

.PHONY: tools
tools: $(addprefix $(BIN)/,$(TOOLS)) ## Build the pinned tools (tools/go.mod) into .bin/

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/sqlc ## Regenerate committed code (buf, sqlc, runtime seccomp profile)
	find proto -name '*.pb.go' -delete
	buf generate
	rm -f core/store/db/db.go core/store/db/models.go core/store/db/*.sql.go
	cd core/store && $(BIN)/sqlc generate
	go run berth.dev/sandbox/docker/internal/seccompgen -out deploy/runtime

.PHONY: check-generated
check-generated: generate ## Fail when committed generated code is stale
	@if [ -n "$$(git status --porcelain -- proto deploy core/store/db)" ]; then \
		git status --porcelain -- proto deploy core/store/db; git diff --stat -- proto deploy core/store/db; \
		echo "generated code is stale: run 'make generate' and commit"; exit 1; fi

.PHONY: lint
lint: $(BIN)/buf ## gofmt, go vet, go mod tidy, buf lint, buf format, buf breaking
	@unformatted=$$(gofmt -l $(MODULES) tools); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet $(PKGS)
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy -diff >/dev/null) || \
		{ echo "$$m/go.mod is not tidy: run (cd $$m && GOWORK=off go mod tidy)"; exit 1; }; done
	buf lint
	buf format --diff --exit-code
	@if git rev-parse -q --verify main >/dev/null && git cat-file -e main:buf.yaml 2>/dev/null; then \
		echo "buf breaking --against .git#branch=main"; buf breaking --against '.git#branch=main'; \
	else echo "buf breaking: no landed main to compare against"; fi

.PHONY: test
test: check-generated lint ## Everything CI runs: generated code, lint, unit, contract and acceptance tests
	go test $(GO_TEST_FLAGS) $(PKGS)

.PHONY: test-short
test-short: ## Unit tests only (-short), no services needed
	go test -short $(GO_TEST_FLAGS) $(PKGS)

.PHONY: check-sandbox-provider-contract
check-sandbox-provider-contract: ## The shared provider contract suite and its validation tables
	go test $(GO_TEST_FLAGS) berth.dev/sandbox/...

.PHONY: services
services: ## Provision and start the test services (Docker Engine, PostgreSQL)
	scripts/test-services up

.PHONY: services-down
services-down: ## Stop the test services started by scripts/test-services
	scripts/test-services down

.PHONY: runtime-image
runtime-image: ## Build the runtime image offline and load it into the test engine as berth-runtime:dev
	scripts/build-runtime-image

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
soak: ## Mixed create/delete workload with random faults for DURATION (default 10m): operations, faults, violations, leaks
	@mkdir -p .run && rm -f $(CHAOS_REPORT)
	@set +e; CHAOS_SOAK_DURATION=$(DURATION) CHAOS_REPORT=$(CHAOS_REPORT) go test $(GO_TEST_FLAGS) -timeout 0 -v -run '^TestSoak$$' berth.dev/test/chaos/ 2>&1 \
		| tee .run/soak.log | grep --line-buffered -E '^(--- |ok|FAIL)|fault:|violated|^soak '; \
		status=$${PIPESTATUS[0]}; echo "full log: .run/soak.log"; exit $$status

.PHONY: bench
bench: ## Benchmarks as ratios against the raw engine, measured in the same run (needs the test services)
	go test -run '^$$' -bench . -benchtime 1x -count=1 berth.dev/sandbox/docker/ berth.dev/test/nodeproto/ berth.dev/test/runtime/

FUZZTIME ?= 1m
FUZZ_TARGETS := \
	berth.dev/runtimebootstrap:FuzzDecode \
	berth.dev/sandbox/strictjson:FuzzDecode \
	berth.dev/sandbox/docker:FuzzDecodeNodeConfig \
	berth.dev/sandbox/nodewire:FuzzInfoFromWire \
	berth.dev/nodeagent:FuzzDecodeConfig \
	berth.dev/runtimebootstrap/turnexec:FuzzPrepare \
	berth.dev/core/turnadmin:FuzzSubmitRequest \
	berth.dev/core/gateway:FuzzResultFromWire

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 1m; make fuzz FUZZTIME=10m)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

.PHONY: up
up: ## Build, provision and start Core + one node agent, create a Session and run a Turn; leaves it running
	scripts/berth-up up

.PHONY: down
down: ## Stop the stack `make up` started and remove its sandboxes
	scripts/berth-up down
