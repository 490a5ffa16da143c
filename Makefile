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

.PHONY: nats-node-loss-test all build web soak test test-stress cover-build plugin-test generate demo bench record record-switch live-test sigkill-sweep cover fuzz clean chromium browser-test screenshots

all: build

build:
	@mkdir -p $(BIN)
	cd host && $(GO) build -o $(BIN)/baton ./cmd/baton
	cd replaypeer && $(GO) build -o $(BIN)/replaypeer .
	@for p in $(PLUGINS); do (cd plugins/$$p && $(GO) build -o $(BIN)/baton-plugin-$$p .) || exit 1; done
	$(BIN)/baton plugin lock $(BIN)

# Every module on its own (GOWORK=off): gofmt, vet, then its tests, once,
# with the race detector and coverage (see cover; the dashboard's browser
# tests among them, with Chromium installed first: see chromium).
# Then the third-party plugin modules under testdata/plugins (exec): each
# outside the workspace, built against this sdk through its own go.work,
# its tests (the conformance suite among them) run as make plugin-test
# runs them.
THIRD_PARTY := $(wildcard testdata/plugins/*)
test:
	@test -z "$$(gofmt -l $(MODULES) $(THIRD_PARTY) .ci)" || (echo "gofmt needed:"; gofmt -l $(MODULES) $(THIRD_PARTY) .ci; exit 1)
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	@for p in $(THIRD_PARTY); do (cd $$p && $(GO) vet ./...) || exit 1; done
	@GOWORK=off $(GO) vet .ci/cover.go
	@$(MAKE) --no-print-directory cover
	@for p in $(THIRD_PARTY); do echo "== $$p"; (cd $$p && BATON_REPLAYPEER=$(COVER_BIN)/replaypeer $(GO) test -race -count=1 ./...) || exit 1; done

# The suite under CPU contention, to find the tests that pass only on an
# idle machine (a wait on a guess, a race): every module's tests as cover
# runs them but without coverage, then the third-party plugin modules, with
# the race detector at -cpu $(STRESS_CPU) (each test once at each
# GOMAXPROCS), while $(STRESS_HOGS) busy loops (one a core) load the
# machine. A test binary that runs past STRESS_TIMEOUT panics with every
# goroutine's stack (go test -timeout); once STRESS_MINUTES have passed,
# the module running is stopped and the rest are not started. The busy
# loops and the tests end with the recipe, however it ends (each loop
# watches the recipe's shell). Prints each failed test under its module
# and keeps the logs; STRESS_MODULES picks modules (STRESS_MODULES="sdk
# replaypeer"). Not part of make test.
STRESS_MODULES ?= $(MODULES) $(THIRD_PARTY)
STRESS_CPU     ?= 1,2
STRESS_HOGS    ?= $(shell nproc)
STRESS_TIMEOUT ?= 45m
STRESS_MINUTES ?= 120
test-stress: build
	@logs=$$(mktemp -d); shell=$$$$; hogs=; run=; \
	trap 'kill $$hogs $$run 2>/dev/null' EXIT; stopped='echo "test-stress: stopped; the logs are in $$logs"'; \
	trap "$$stopped; exit 130" INT; trap "$$stopped; exit 143" TERM; \
	for i in $$(seq $(STRESS_HOGS)); do (while kill -0 $$shell 2>/dev/null; do :; done) & hogs="$$hogs $$!"; done; \
	echo "test-stress: $(STRESS_HOGS) busy loops; go test -race -cpu $(STRESS_CPU); $(STRESS_TIMEOUT) a test binary, $(STRESS_MINUTES) minutes in all"; \
	end=$$((SECONDS + $(STRESS_MINUTES) * 60)); failed=; late=; \
	for m in $(STRESS_MODULES); do \
		left=$$((end - SECONDS)); \
		if [ $$left -le 0 ]; then late="$$late $$m"; continue; fi; \
		case $$m in testdata/*) gowork=;; *) gowork=off;; esac; \
		log=$$logs/$$(echo $$m | tr / -).log; echo "== $$m"; \
		(cd $$m && exec env GOWORK=$$gowork BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer timeout -k 1m $${left}s \
			$(GO) test -race -count=1 -cpu $(STRESS_CPU) -timeout $(STRESS_TIMEOUT) ./...) >$$log 2>&1 & run=$$!; \
		wait $$run; rc=$$?; run=; \
		grep -E '^(ok|FAIL|panic: )|^\s*--- FAIL|^\s+Test\S* \([0-9]' $$log; \
		if [ $$rc -eq 124 ]; then echo "stopped: STRESS_MINUTES=$(STRESS_MINUTES) ran out"; late="$$late $$m"; \
		elif [ $$rc -ne 0 ]; then failed="$$failed $$m"; fi; \
	done; \
	test -z "$$failed" || echo "test-stress: tests failed in:$$failed"; \
	test -z "$$late" || echo "test-stress: not run to the end in $(STRESS_MINUTES) minutes:$$late"; \
	if [ -n "$$failed$$late" ]; then echo "test-stress: the logs are in $$logs"; exit 1; fi; \
	rm -rf $$logs; echo "test-stress: every module passed"

# Coverage of every layer, from one run of each module's tests. Plugins, the
# replay peer and the CLI run as separate processes in tests, so cover-build
# builds them with -cover into $(COVER_BIN) (BATON_BIN, BATON_REPLAYPEER),
# and plugintest.Build gets the same flags through GOFLAGS. Each program
# covers its module's packages and sdk's. The test binaries write to
# coverage/data (-test.gocoverdir) and point their children's GOCOVERDIR
# there too (plugintest.CoverChildren); a process killed by a signal writes
# nothing. .ci/cover.go merges it all, prints coverage per package and
# holds the floors: host/internal/domain 100%; orchestrator, eventlog and
# checkpoint 90%; the service (host/internal/service) 80%; every sdk
# package 85%; each plugin's adapter package (plugins/*/internal/*) 80%.
# Not gated: sdk/internal/pluginpb and host/api/baton/v1 (generated by
# protoc), the plugins' main packages (wiring: they only call
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

cover: cover-build chromium
	@rm -rf $(COVER_OUT)/data && mkdir -p $(COVER_OUT)/data
	@failed=; for m in $(MODULES); do \
		echo "== $$m"; \
		(cd $$m && GOWORK=off GOFLAGS="-cover $(call COVERFLAGS,$$m)" \
			BATON_BIN=$(COVER_BIN) BATON_REPLAYPEER=$(COVER_BIN)/replaypeer $(BROWSER_ENV) \
			$(GO) test -race -count=1 -timeout 20m -cover $(call COVERFLAGS,$$m) ./... -args -test.gocoverdir=$(COVER_OUT)/data) \
			|| failed="$$failed $$m"; \
	done; \
	GOWORK=off $(GO) run .ci/cover.go -data $(COVER_OUT)/data -profile $(COVER_OUT)/cover.out $(MODULES) || floors=1; \
	test -z "$$failed" || echo "tests failed in:$$failed"; \
	test -z "$$failed$$floors"

# The dashboard's browser tests (TestBrowser* in host/cmd/baton) drive
# headless Chromium: Debian's chromium package, installed here when it is
# missing (about half a minute on a fresh machine, apt-get update
# included). make test (through cover) and browser-test run them with
# BATON_BROWSER=required, so a machine without Chromium fails them, naming
# the package, where a plain go test skips them. A failed browser test
# saves each tab's page in $(SCREENSHOTS) and logs its text.
SCREENSHOTS := $(CURDIR)/coverage/screenshots
BROWSER_ENV  = BATON_BROWSER=required BATON_SCREENSHOTS=$(SCREENSHOTS)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	@command -v chromium >/dev/null || (echo "installing Debian's chromium for the browser tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null)

# Only the browser tests, against the binaries make build makes.
browser-test: build chromium
	cd host && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer $(BROWSER_ENV) \
		$(GO) test -race -count=1 -run '^TestBrowser' ./cmd/baton/ ./internal/browsertest/

# The README's pictures of the dashboard (docs/dashboard-*.png), taken by
# TestBrowserViews from replayed threads.
screenshots: build chromium
	cd host && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer $(BROWSER_ENV) BATON_DASHBOARD_SHOTS=$(CURDIR)/docs \
		$(GO) test -count=1 -run '^TestBrowserViews$$' ./cmd/baton/

# One plugin against the replay peer, through its real process boundary:
# its module's tests, among them the conformance suite (TestConformance:
# plugintest.Conformance plays the scenarios the plugin's capabilities
# call for), each scenario's result and notes shown. A first-party plugin
# (plugins/X) is tested alone (GOWORK=off); one under testdata/plugins
# (exec, a third-party module outside the workspace) is built against this
# sdk through its own go.work. With PROVIDER=acp AGENT=ID, only the ACP
# agent harness for that agent: the standard ACP transcripts retargeted to
# its identity, then its own (testdata/acp/agents/ID).
PLUGIN_DIR    = $(firstword $(wildcard plugins/$(PROVIDER) testdata/plugins/$(PROVIDER)))
PLUGIN_GOWORK = $(if $(filter testdata/%,$(PLUGIN_DIR)),,off)
plugin-test: build
	@test -n "$(PLUGIN_DIR)" || (echo "no plugin $(PROVIDER) (have: $(PLUGINS) $(notdir $(wildcard testdata/plugins/*)))"; exit 2)
	@test -f $(PLUGIN_DIR)/conformance_test.go || (echo "$(PLUGIN_DIR) has no conformance_test.go (plugintest.Conformance)"; exit 2)
	@test -z "$(AGENT)" -o "$(PROVIDER)" = acp || (echo "AGENT is an ACP agent: give PROVIDER=acp"; exit 2)
	@test -z "$(AGENT)" -o -d testdata/acp/agents/$(AGENT) || (echo "no transcripts of agent $(AGENT) (have: $(notdir $(wildcard testdata/acp/agents/*)))"; exit 2)
	cd $(PLUGIN_DIR) && GOWORK=$(PLUGIN_GOWORK) BATON_REPLAYPEER=$(BIN)/replaypeer BATON_ACP_AGENT=$(AGENT) \
		$(GO) test -race -count=1 -v $(if $(AGENT),-run '^TestAgentHarness$$$$') ./... 2>&1 \
		| grep -E '^ *(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go|conformance.go' ; exit $${PIPESTATUS[0]}

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
	$(MAKE) --no-print-directory web
	$(MAKE) --no-print-directory build
	@$(BIN)/baton plugin list --markdown --data $(TOOLS)/nodata >$(TOOLS)/capabilities.md
	@awk -v f=$(TOOLS)/capabilities.md '/<!-- capabilities:end -->/ {skip=0} !skip {print} \
		/<!-- capabilities:begin -->/ {while ((getline l < f) > 0) print l; skip=1}' README.md >$(TOOLS)/README.md
	@mv $(TOOLS)/README.md README.md
	@echo "README.md: capability matrix of $$($(BIN)/baton plugin list --data $(TOOLS)/nodata | tail -n +2 | wc -l) plugins"

# The dashboard: web/'s pinned packages (npm ci, no install scripts), its
# TypeScript client generated from baton.proto (protoc-gen-es), a type
# check, and the build (esbuild) into host/internal/webui/dist, which the
# baton binary embeds. Both the client and dist are committed, so build
# and test need no Node; make generate runs this, and a second run
# changes nothing.
web:
	@command -v protoc >/dev/null || (apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null)
	@command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null)
	cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	cd web && rm -rf src/gen && mkdir -p src/gen && protoc -I ../host/api/baton/v1 \
		--plugin=protoc-gen-es=node_modules/.bin/protoc-gen-es --es_out=src/gen --es_opt=target=ts baton.proto
	cd web && node_modules/.bin/tsc --noEmit
	cd web && node build.mjs

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
# server on 127.0.0.1. See testdata/record.sh. PROVIDER=FIRST+SECOND (e.g.
# codex+claude) with SCENARIO=provider_switch_return,
# provider_switch_rollback or provider_switch_rollback_away records a
# thread that switches from FIRST to SECOND and back, one transcript per
# provider, driven by the scenario's orchestrator test
# (testdata/record_switch.sh); record-switch records every pair and
# scenario the tests replay (again after a change to the handoff text).
# A SCENARIO ending in _restart (usage_limit_restart) runs through baton
# serve, killed with SIGKILL during the run's wait and started again after
# it (testdata/record_restart.sh). PROVIDER=acp records claude-code-acp;
# ACP_AGENT=codex-acp, opencode, qwen-code or gemini records that ACP agent instead,
# into testdata/acp/agents/ACP_AGENT/ (testdata/acp/agents/record.sh).
record: build
	cd host && $(GO) build -o $(BIN)/baton-modelserver ./cmd/baton-modelserver
	cd host && $(GO) build -o $(BIN)/mcptool ./internal/testbin/mcptool
	ACP_AGENT=$(ACP_AGENT) bash testdata/record.sh $(PROVIDER) $(SCENARIO)

SWITCH_RECORDINGS ?= codex+claude:provider_switch_return acp+opencode:provider_switch_return \
	codex+claude:provider_switch_rollback acp+opencode:provider_switch_rollback \
	codex+claude:provider_switch_rollback_away acp+opencode:provider_switch_rollback_away \
	codex+claude:usage_limit_switch_return
record-switch: build
	cd host && $(GO) build -o $(BIN)/baton-modelserver ./cmd/baton-modelserver
	@for ps in $(SWITCH_RECORDINGS); do GO=$(GO) bash testdata/record.sh $${ps%%:*} $${ps#*:} || exit 1; done

# Real turns against the real agents (installed from npm into .cache/ on
# first use) and the scripted model servers on 127.0.0.1: each scenario is
# recorded to a temp file and replayed through baton. Then the real codex
# and claude at once, each on a worktree of its own of one repository
# (baton run --worktree --provider codex,claude), both writing a file, both
# branches merged with baton merge, the user's worktree untouched
# (codex,claude:worktree_parallel, testdata/live_worktrees.sh; LIVE_SERVE=1
# runs those threads in baton serve). Then `baton run --agent ID` for each
# of LIVE_AGENTS: installed with `baton agents install` from a one-entry
# registry file pinned to the recorder's version, run against the scripted
# model server (testdata/live_agents.sh). Not part of `make test`: it needs
# the npm registry and takes a few minutes.
LIVE_AGENTS ?= claude-code-acp codex-acp opencode qwen-code gemini
LIVE_SCENARIOS ?= acp:simple acp:approval_accept acp:thread_rollback acp:mcp_tools codex:simple codex:mcp_usage codex:approval_accept codex:subagent codex:thread_rollback claude:simple claude:mcp_usage claude:approval_accept claude:message_steering claude:subagent claude:thread_rollback opencode:simple opencode:mcp_usage opencode:approval_accept opencode:subagent opencode:thread_rollback codex,claude:worktree_parallel
# The tests that stop nodes of a three-node JetStream cluster under the
# shared log and the lease (skipped by make test: they wait out elections).
nats-node-loss-test:
	cd host && BATON_NATS_NODE_LOSS=1 $(GO) test -race -count=1 -timeout 15m -run 'TestClusterKeepsTheLogThroughLostNodes|TestLeaseOutlivesANodesLoss' ./internal/jetstreamlog/ ./internal/lease/

live-test: build
	cd host && $(GO) build -o $(BIN)/baton-modelserver ./cmd/baton-modelserver
	cd host && $(GO) build -o $(BIN)/mcptool ./internal/testbin/mcptool
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	for ps in $(LIVE_SCENARIOS); do \
		p=$${ps%%:*}; s=$${ps#*:}; echo "== live $$p $$s"; \
		RECORD_OUT=$$out/$$p-$$s.ndjson bash testdata/record.sh $$p $$s >$$out/$$p-$$s.log 2>&1 || { cat $$out/$$p-$$s.log; exit 1; }; \
		grep -E 'replay OK|wrote|record\.sh: live:' $$out/$$p-$$s.log; \
	done
	@echo "== live baton run --agent $(LIVE_AGENTS)"
	@bash testdata/live_agents.sh $(LIVE_AGENTS)

# The SIGKILL sweep on its own: the real baton killed 100 times at random
# points of replayed sessions (prompts, approvals, steering, interrupts;
# ACP, Codex and Claude) on one data dir (TestSIGKILLSweep
# in host/cmd/baton, which make test runs too; SIGKILL_KILLS=1000 for a
# longer one). A failure names its seed:
# BATON_SIGKILL_SEED=N make sigkill-sweep plays the same kill points.
SIGKILL_KILLS ?= 100
sigkill-sweep: build
	cd host && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer BATON_SIGKILL_KILLS=$(SIGKILL_KILLS) \
		$(GO) test -count=1 -run '^TestSIGKILLSweep$$' -v ./cmd/baton/

# The soak (not in CI): baton serve for SOAK (10m) with SOAK_THREADS (20)
# workers replaying every provider's recorded sessions in a loop, providers
# and plugins killed with SIGKILL at random, a store fault now and then
# (the service's file size limit dropped: its next write fails, as on a
# full disk; a supervisor starts it again), and subscribers that fall
# behind and reconnect. It fails unless every run ended with a reason, the
# log is gapless, every projection equals its rebuild, memory is flat after
# warm-up and nothing leaked; its figures are in the -v output
# (TestSoak in host/cmd/baton).
SOAK ?= 10m
SOAK_THREADS ?= 20
soak: build
	cd host && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer BATON_SOAK=$(SOAK) BATON_SOAK_THREADS=$(SOAK_THREADS) \
		$(GO) test -count=1 -run '^TestSoak$$' -v -timeout 0 ./cmd/baton/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'; exit $${PIPESTATUS[0]}

# Benchmarks, 5 runs each; compare with benchstat. Baselines run in the same
# invocation: raw Pebble and SQLite (cgo, -tags sqlitebench) beside the
# event log's appends, an empty data dir beside 100,000 and 1,000,000
# events, the plugin alone beside the whole pipeline, 8 worktree threads
# of one repository one after another beside the same in parallel
# (BenchmarkWorktreeThreads, with the CPU time each used), the dashboard's
# first render in Chromium of 1,000 threads and of a thread of 10,000
# deltas beside the API call the page makes for it (BenchmarkDashboard*:
# render-ms and api-ms, medians). The data dirs of recorded threads are
# made once and kept in the system's temp dir.
bench: build chromium
	@for m in host sdk; do (cd $$m && GOWORK=off BATON_BIN=$(BIN) BATON_REPLAYPEER=$(BIN)/replaypeer $(BROWSER_ENV) \
		$(GO) test -tags sqlitebench -run '^$$' -bench . -benchmem -count 5 -timeout 60m ./...) || exit 1; done | tee $(CURDIR)/bench.txt

# Fuzz every decoder of outside input for FUZZTIME each. New interesting
# inputs stay in the Go cache; copy the ones worth keeping into the
# package's testdata/fuzz/NAME so every `go test` replays them.
FUZZTIME ?= 30s
fuzz:
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./transcript/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./transcript/
	cd plugins/acp && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/acp/
	cd plugins/acp && $(GO) test -run '^$$' -fuzz '^FuzzLimitOf$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/acp/
	cd plugins/acp && $(GO) test -run '^$$' -fuzz '^FuzzDecodeUpdateOnePass$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/acp/
	cd plugins/codex && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/codex/
	cd plugins/codex && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/codex/
	cd plugins/codex && $(GO) test -run '^$$' -fuzz '^FuzzLimit$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/codex/
	cd plugins/claude && $(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/claude/
	cd plugins/claude && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/claude/
	cd plugins/cursor && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/cursor/
	cd plugins/cursor && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/cursor/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./sse/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./ndjson/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzNotification$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./jsonrpcproc/
	cd sdk && $(GO) test -run '^$$' -fuzz '^FuzzRecordLine$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./framelog/
	cd plugins/opencode && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/opencode/
	cd plugins/opencode && $(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/opencode/
	cd plugins/opencode && $(GO) test -run '^$$' -fuzz '^FuzzLimitEvents$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/opencode/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzDecodeCommand$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/domain/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzDecodeEffect$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/domain/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzClientConversions$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/service/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/scenario/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzParseSummary$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/checkpoint/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzStoredValues$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/eventlog/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzSeal$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/eventlog/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/mcpconf/
	cd host && $(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./internal/agents/

clean:
	rm -rf $(BIN) $(TOOLS)
