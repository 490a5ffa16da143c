# Baton. Every target installs what it needs; see README.md.

SHELL     := /bin/bash
GO        ?= go
BIN       := $(CURDIR)/bin
PLUGINS   := $(notdir $(wildcard plugins/*))
MODULES   := sdk host replaypeer $(addprefix plugins/,$(PLUGINS))
PROVIDER  ?= acp
SCENARIO  ?= simple
TOOLS     := $(CURDIR)/.bin
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1

.PHONY: all build test cover-build plugin-test generate demo bench record live-test cover fuzz clean

all: build

build:
	@mkdir -p $(BIN)
	cd host && $(GO) build -o $(BIN)/baton ./cmd/baton
	cd replaypeer && $(GO) build -o $(BIN)/replaypeer .
	@for p in $(PLUGINS); do (cd plugins/$$p && $(GO) build -o $(BIN)/baton-plugin-$$p .) || exit 1; done
	$(BIN)/baton plugin lock $(BIN)

# Every module on its own (GOWORK=off): gofmt, vet, then its tests, once,
# with the race detector and coverage (see cover).
test:
	@test -z "$$(gofmt -l $(MODULES) .ci)" || (echo "gofmt needed:"; gofmt -l $(MODULES) .ci; exit 1)
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	@GOWORK=off $(GO) vet .ci/cover.go
	@$(MAKE) --no-print-directory cover

# Coverage of every layer, from one run of each module's tests. Plugins, the
# replay peer and the CLI run as separate processes in tests, so cover-build
# builds them with -cover into $(COVER_BIN) (BATON_BIN, BATON_REPLAYPEER),
# and plugintest.Build gets the same flags through GOFLAGS. Each program
# covers its module's packages and sdk's. The test binaries write to
# coverage/data (-test.gocoverdir) and point their children's GOCOVERDIR
# there too (plugintest.CoverChildren); a process killed by a signal writes
# nothing. .ci/cover.go merges it all, prints coverage per package and
# holds the floors: host/internal/domain 100%; orchestrator, eventlog and
# checkpoint 90%; every sdk package 85%; each plugin's adapter package
# (plugins/*/internal/*) 80%. Not gated: sdk/internal/pluginpb (generated
# by protoc), the plugins' main packages (wiring: they only call
# sdk.Serve), and packages the issue sets no floor for (reported only).
# Fails if any test fails or any package is below its floor, naming all.
# The merged profile: go tool cover -html=coverage/cover.out
COVER_BIN := $(BIN)/cover
COVER_OUT := $(CURDIR)/coverage
MODPATH   := github.com/baton-run/baton
COVERFLAGS = -covermode=atomic -coverpkg=$(MODPATH)/$(1)/...,$(MODPATH)/sdk/...

cover-build:
	@mkdir -p $(COVER_BIN) $(COVER_OUT)
	cd host && GOWORK=off $(GO) build -cover $(call COVERFLAGS,host) -o $(COVER_BIN)/baton ./cmd/baton
	cd replaypeer && GOWORK=off $(GO) build -cover $(call COVERFLAGS,replaypeer) -o $(COVER_BIN)/replaypeer .
	@for p in $(PLUGINS); do echo "build plugins/$$p (cover)"; (cd plugins/$$p && GOWORK=off $(GO) build -cover $(call COVERFLAGS,plugins/$$p) \
		-o $(COVER_BIN)/baton-plugin-$$p .) || exit 1; done
	@rm -rf $(COVER_OUT)/lock && mkdir -p $(COVER_OUT)/lock # the lock run's own counters, not the tests'
	@GOCOVERDIR=$(COVER_OUT)/lock $(COVER_BIN)/baton plugin lock $(COVER_BIN)

cover: cover-build
	@rm -rf $(COVER_OUT)/data && mkdir -p $(COVER_OUT)/data
	@failed=; for m in $(MODULES); do \
		echo "== $$m"; \
		(cd $$m && GOWORK=off GOFLAGS="-cover $(call COVERFLAGS,$$m)" \
			BATON_BIN=$(COVER_BIN) BATON_REPLAYPEER=$(COVER_BIN)/replaypeer \
			$(GO) test -race -count=1 -cover $(call COVERFLAGS,$$m) ./... -args -test.gocoverdir=$(COVER_OUT)/data) \
			|| failed="$$failed $$m"; \
	done; \
	GOWORK=off $(GO) run .ci/cover.go -data $(COVER_OUT)/data -profile $(COVER_OUT)/cover.out $(MODULES) || floors=1; \
	test -z "$$failed" || echo "tests failed in:$$failed"; \
	test -z "$$failed$$floors"

# One plugin against the replay peer, through its real process boundary.
plugin-test: build
	@test -d plugins/$(PROVIDER) || (echo "no plugin $(PROVIDER) (have: $(PLUGINS))"; exit 2)
	cd plugins/$(PROVIDER) && GOWORK=off BATON_REPLAYPEER=$(BIN)/replaypeer $(GO) test -race -count=1 -v ./... 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

# Regenerate the gRPC code and the README's capability matrix (from the
# plugins' Describe answers); the result must match what is committed.
generate:
	@command -v protoc >/dev/null || (apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	cd sdk/internal/pluginpb && PATH=$(TOOLS):$$PATH protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
	cd host/api/baton/v1 && PATH=$(TOOLS):$$PATH protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative baton.proto
	$(MAKE) --no-print-directory build
	@$(BIN)/baton plugin list --markdown --data $(TOOLS)/nodata >$(TOOLS)/capabilities.md
	@awk -v f=$(TOOLS)/capabilities.md '/<!-- capabilities:end -->/ {skip=0} !skip {print} \
		/<!-- capabilities:begin -->/ {while ((getline l < f) > 0) print l; skip=1}' README.md >$(TOOLS)/README.md
	@mv $(TOOLS)/README.md README.md
	@echo "README.md: capability matrix of $$($(BIN)/baton plugin list --data $(TOOLS)/nodata | tail -n +2 | wc -l) plugins"

# A multi-turn session streamed by the real host, plugin and replay peer
# (a recorded ACP agent), in a fresh git workspace and data dir.
demo: build
	@tmp=$$(mktemp -d); mkdir -p $$tmp/work; git -C $$tmp/work init -q 2>/dev/null || true; \
	mapfile -t msgs < testdata/acp/multi_turn.messages; \
	echo "baton run --provider acp (replaying testdata/acp/multi_turn.ndjson in $$tmp/work)"; \
	$(BIN)/baton run --data $$tmp/data --cwd $$tmp/work --provider acp \
		--provider-command "$(BIN)/replaypeer --transcript $(CURDIR)/testdata/acp/multi_turn.ndjson --speed 1" \
		"$${msgs[@]}"

# Record a transcript from the real provider binary (installed from npm into
# .cache/), driven by baton through the real plugin, with a scripted model
# server on 127.0.0.1. See testdata/record.sh.
record: build
	cd host && $(GO) build -o $(BIN)/baton-modelserver ./cmd/baton-modelserver
	bash testdata/record.sh $(PROVIDER) $(SCENARIO)

# Real turns against the real agents (installed from npm into .cache/ on
# first use) and the scripted model servers on 127.0.0.1: each scenario is
# recorded to a temp file and replayed through baton. Not part of `make
# test`: it needs the npm registry and takes a minute or two.
LIVE_SCENARIOS ?= acp:simple acp:approval_accept acp:thread_rollback codex:simple codex:approval_accept codex:subagent codex:thread_rollback claude:simple claude:approval_accept claude:message_steering claude:subagent claude:thread_rollback opencode:simple opencode:approval_accept opencode:subagent opencode:thread_rollback
live-test: build
	cd host && $(GO) build -o $(BIN)/baton-modelserver ./cmd/baton-modelserver
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	for ps in $(LIVE_SCENARIOS); do \
		p=$${ps%%:*}; s=$${ps#*:}; echo "== live $$p $$s"; \
		RECORD_OUT=$$out/$$p-$$s.ndjson bash testdata/record.sh $$p $$s >$$out/$$p-$$s.log 2>&1 || { cat $$out/$$p-$$s.log; exit 1; }; \
		grep -E 'replay OK|wrote' $$out/$$p-$$s.log; \
	done

# Benchmarks, 5 runs each; compare with benchstat. Baselines run in the same
# invocation: raw Pebble and SQLite (cgo, -tags sqlitebench) beside the
# event log's appends, an empty data dir beside 100,000 and 1,000,000
# events, the plugin alone beside the whole pipeline. The data dirs of
# recorded threads are made once and kept in the system's temp dir.
bench: build
	@for m in host sdk; do (cd $$m && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer \
		$(GO) test -tags sqlitebench -run '^$$' -bench . -benchmem -count 5 -timeout 60m ./...) || exit 1; done | tee $(CURDIR)/bench.txt

# Fuzz every decoder of outside input for FUZZTIME each. New interesting
# inputs stay in the Go cache; copy the ones worth keeping into the
# package's testdata/fuzz/NAME so every `go test` replays them.
FUZZTIME ?= 30s
fuzz:
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./transcript/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./transcript/
	cd plugins/acp && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/acp/
	cd plugins/codex && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/codex/
	cd plugins/codex && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/codex/
	cd plugins/claude && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/claude/
	cd plugins/claude && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/claude/
	cd plugins/cursor && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/cursor/
	cd plugins/cursor && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/cursor/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./sse/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./ndjson/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzNotification$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./jsonrpcproc/
	cd plugins/opencode && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/opencode/
	cd plugins/opencode && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/opencode/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/domain/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/scenario/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzParseSummary$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/checkpoint/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzStoredValues$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/eventlog/

clean:
	rm -rf $(BIN) $(TOOLS)
