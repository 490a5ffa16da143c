#!/usr/bin/env bash
# record.sh PROVIDER SCENARIO — record a replay transcript from a real agent.
# record.sh FIRST+SECOND SCENARIO — record a thread that switches from one
# real agent to another and back (provider_switch_return): see
# testdata/record_switch.sh.
# record.sh FIRST,SECOND SCENARIO — no recording: real agents in parallel,
# each on a worktree of its own of one repository, their branches merged
# (worktree_parallel, in make live-test): see testdata/live_worktrees.sh.
#
# Usually run as `make record PROVIDER=acp|codex SCENARIO=NAME`, which
# builds bin/baton, the plugins, bin/replaypeer and bin/baton-modelserver
# first.
#
# For PROVIDER=acp it:
#   1. installs the real agent (pinned npm package) into .cache/npm-acp if it
#      is missing or has another version;
#   2. makes a temp HOME and a temp git workspace (one commit with a README);
#   3. starts bin/baton-modelserver (a scripted Anthropic Messages API) on
#      127.0.0.1 with testdata/acp/scenarios/SCENARIO.json, "{{CWD}}" in the
#      script replaced by the workspace's absolute path;
#   4. runs `bin/baton run` with the real ACP plugin, whose provider command is
#      `bin/replaypeer record ... -- <agent, with an offline env>`, sending the
#      lines of testdata/acp/SCENARIO.messages as one run each;
#   5. checks the result (baton exit status, script fully consumed, transcript
#      header and end) and moves it to testdata/acp/SCENARIO.ndjson;
#   6. replays the new transcript through baton in a fresh empty workspace.
#
# The agent never talks to the internet: ANTHROPIC_BASE_URL points at the
# local model server and the env below switches off telemetry, error
# reports, auto-update and the "fast mode" prefetch (which ignores
# ANTHROPIC_BASE_URL). See .notes/acp-agent-probe.md.
#
# PROVIDER=acp with ACP_AGENT=codex-acp, opencode, qwen-code or gemini records that
# agent instead of claude-code-acp (the default): see
# testdata/acp/agents/record.sh. Its transcripts go to
# testdata/acp/agents/ID/SCENARIO.ndjson, its model scripts are
# testdata/acp/agents/ID/scenarios/SCENARIO.json, and its client side is
# testdata/acp/agents/ID/SCENARIO.{steps.json,messages,flags,exit} where
# present, else testdata/acp's.
#
# For PROVIDER=codex (`codex app-server`, see record_codex and
# .notes/codex-probe.md) the steps are the same, with a scripted OpenAI
# Responses API, testdata/codex/scenarios/SCENARIO.json and
# testdata/codex/SCENARIO.{steps.json,messages}.
#
# A scenario whose name ends in _restart (usage_limit_restart) is played
# through `baton serve`, which is killed with SIGKILL while the run waits for
# a provider limit and started again after the wait's instant: see
# testdata/record_restart.sh.
#
# Env: RECORD_OUT=FILE writes the transcript there instead of testdata (what
# `make live-test` does: a real run, checked by replaying it, that changes
# nothing in the repository); KEEP_TMP=1 keeps the temp directory (logs, agent HOME, workspace);
# BATON_LOG_LEVEL=debug makes the recording baton run log more (to
# TMP/baton.err).
#
# Sourced (`source testdata/record.sh` from another script, as
# testdata/live_agents.sh does), it only defines its helpers (die,
# npm_pinned, init_workspace, start_modelserver, stop_modelserver, cleanup
# on EXIT) and REPO, BIN: it records nothing.
set -euo pipefail

die() { echo "record.sh: $*" >&2; exit 1; }

RECORD_SOURCED=
[ "${BASH_SOURCE[0]}" = "$0" ] || RECORD_SOURCED=1

if [ -z "$RECORD_SOURCED" ]; then
  [ $# -eq 2 ] || die "usage: record.sh PROVIDER SCENARIO"
  PROVIDER=$1
  SCENARIO=$2
  case $SCENARIO in
    '' | */* | .*) die "bad scenario name: '$SCENARIO'" ;;
  esac
fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/bin
PATH=$BIN:$PATH # mcptool, the test MCP server, for a scenario with MCP servers

if [ -z "$RECORD_SOURCED" ]; then
  for b in baton $(printf 'baton-plugin-%s ' $(tr '+,' '  ' <<<"$PROVIDER")) replaypeer baton-modelserver; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing; run: make record PROVIDER=$PROVIDER SCENARIO=$SCENARIO"
  done
fi

# quote WORD: single-quote a word for --provider-command (split like a shell).
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# case_file PROVIDER EXT: the scenario's file SCENARIO.EXT (exit, flags,
# mcp): CASE_DIR's when it has one (an ACP agent's own directory), else
# testdata/PROVIDER's.
case_file() {
  if [ -n "$CASE_DIR" ] && [ -f "$CASE_DIR/$SCENARIO.$2" ]; then
    echo "$CASE_DIR/$SCENARIO.$2"
  else
    echo "$REPO/testdata/$1/$SCENARIO.$2"
  fi
}

# need_tools checks for the programs recording uses.
need_tools() {
  local t
  for t in node npm git jq; do
    command -v "$t" >/dev/null || die "$t is not installed"
  done
}

# npm_pinned PKG VERSION DIR BIN installs PKG@VERSION into DIR unless it is
# there (BIN is the executable it provides).
npm_pinned() {
  local pkg=$1 version=$2 dir=$3 bin=$4 have=
  local pkg_json=$dir/node_modules/$pkg/package.json
  [ -f "$pkg_json" ] && have=$(jq -r .version "$pkg_json")
  if [ "$have" != "$version" ] || [ ! -x "$bin" ]; then
    echo "record.sh: installing $pkg@$version into $dir" >&2
    mkdir -p "$dir"
    # A package.json of its own keeps npm from walking up to another project.
    [ -f "$dir/package.json" ] || echo '{"private":true}' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --save-exact "$pkg@$version" >&2
    have=$(jq -r .version "$pkg_json")
    [ "$have" = "$version" ] || die "installed $pkg is $have, want $version"
  fi
}

# init_workspace WS makes WS a git repository with one commit (unless it is
# one already: the shared workspace of a switch recording).
init_workspace() {
  local ws=$1
  [ -d "$ws/.git" ] && return
  mkdir -p "$ws"
  git init -q "$ws"
  printf '# Replay workspace\n\nA throwaway repository for recording transcripts.\n' >"$ws/README.md"
  git -C "$ws" add README.md
  GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \
    git -C "$ws" -c user.name=recorder -c user.email=recorder@example.invalid \
    -c commit.gpgsign=false commit -q -m "Initial commit"
}

# record_and_verify PROVIDER WS CMD OUT plays the client side through baton
# with CMD (replaypeer record around the real provider) as the provider
# command, checks the transcript (every scripted reply consumed, a recorded
# header, a runtime_exit at the end, no temp path left), writes it to OUT
# with our own version made "<any>", and replays it through baton in a
# fresh, empty workspace.
record_and_verify() {
  local provider=$1 ws=$2 cmd=$3 out=$4
  echo "record.sh: recording $provider/$SCENARIO (${STEPS:-${#msgs[@]} messages}, model server $MS_URL, tmp $TMP)" >&2
  local start=$SECONDS rc=0 want_rc=0 exit_file
  # A scenario whose run ends on a provider limit exits non-zero by design:
  # testdata/PROVIDER/SCENARIO.exit holds the status baton run must exit
  # with (recording and replay alike).
  exit_file=$(case_file "$provider" exit)
  if [ -f "$exit_file" ]; then
    want_rc=$(tr -d '[:space:]' <"$exit_file")
  fi
  run_baton "$provider" "$TMP/data" "$ws" "$cmd" "$TMP/baton.out" "$TMP/baton.err" || rc=$?
  cat "$TMP/baton.out"
  if [ "$rc" -ne "$want_rc" ]; then
    KEEP_TMP=1
    cat "$TMP/baton.err" >&2
    echo "--- model server log:" >&2
    cat "$TMP/modelserver.err" >&2
    die "baton run exited with status $rc, want $want_rc; nothing written (logs kept in $TMP)"
  fi
  echo "record.sh: baton run took $((SECONDS - start))s" >&2
  check_mcp_evidence "$provider" "$ws"

  stop_modelserver
  local consumed
  consumed=$(sed -n 's/.*stopped; \([0-9]*\) script replies consumed.*/\1/p' "$TMP/modelserver.err")
  if [ "$consumed" != "$REPLIES" ]; then
    KEEP_TMP=1
    cat "$TMP/modelserver.err" >&2
    die "the provider consumed ${consumed:-?} of $REPLIES scripted model replies (logs kept in $TMP)"
  fi
  local t=$TMP/transcript.ndjson
  [ -s "$t" ] || { KEEP_TMP=1; die "replaypeer wrote no transcript (logs kept in $TMP)"; }
  jq -e -s '.[0].type == "transcript_start" and .[0].metadata.source == "recorded"' "$t" >/dev/null ||
    { KEEP_TMP=1; die "transcript header is not a recorded transcript_start (kept in $TMP)"; }
  jq -e -s '.[-1].type == "runtime_exit"' "$t" >/dev/null ||
    { KEEP_TMP=1; die "transcript does not end with runtime_exit (kept in $TMP)"; }
  # A provider's redactions before the temp path check (testdata/PROVIDER/
  # record.sh or an ACP agent's recorder may define redact_PROVIDER FILE).
  if declare -F "redact_$provider" >/dev/null; then
    "redact_$provider" "$t"
  fi
  local -a paths=(-e "$TMP" -e "$ws")
  [ -n "$WS_TMP" ] && paths+=(-e "$WS_TMP")
  case $provider in codex | opencode) paths+=(-e "$REPO") ;; esac
  if [ -n "$CASE_DIR" ]; then # an ACP agent other than claude-code-acp: its TMP is under .cache
    paths+=(-e "$REPO")
  fi
  if grep -q "${paths[@]}" "$t"; then
    KEEP_TMP=1
    die "transcript still contains a temp path (kept in $TMP)"
  fi
  # Our own version is not evidence about the provider: any version of the
  # plugin may replay the transcript.
  jq -c 'if .type == "expect_outbound" and .frame.method == "initialize"
         then .frame.params.clientInfo.version = "<any>" else . end' "$t" >"$t.tmp" && mv "$t.tmp" "$t"
  # A provider's own rewrites (testdata/PROVIDER/record.sh may define
  # postprocess_PROVIDER FILE).
  if declare -F "postprocess_$provider" >/dev/null; then
    "postprocess_$provider" "$t"
  fi
  cp "$t" "$out"
  echo "record.sh: wrote ${out#"$REPO"/} ($(wc -l <"$out") lines)" >&2

  init_workspace "$TMP/replay/ws" # a git repository, as checkpoints need
  # What else the peer command needs for this transcript (--listen for an
  # HTTP server, a final "--" for the plugin's arguments).
  local invoked
  invoked=$("$BIN/replaypeer" peer-args "$out") || die "replaypeer peer-args $out failed"
  rc=0
  run_baton "$provider" "$TMP/replay/data" "$TMP/replay/ws" \
    "$(quote "$BIN/replaypeer") --transcript $(quote "$out") --speed 0 --state $(quote "$TMP/replay/cursor")${invoked:+ $invoked}" \
    "$TMP/replay.out" "$TMP/replay.err" || rc=$?
  if [ "$rc" -ne "$want_rc" ]; then
    KEEP_TMP=1
    cat "$TMP/replay.out" "$TMP/replay.err" >&2
    die "replaying ${out#"$REPO"/} failed with status $rc (logs kept in $TMP)"
  fi
  echo "record.sh: replay OK" >&2
}

# ACP_STDIN_EOF_WRAPPER is a node program that runs an ACP agent (argv[1]
# on) and stops it when the client closes its stdin: see record_acp.
ACP_STDIN_EOF_WRAPPER='const c = require("child_process").spawn(process.argv[1], process.argv.slice(2), {stdio: ["pipe", "inherit", "inherit"]});
process.stdin.pipe(c.stdin);
process.stdin.on("end", () => setTimeout(() => c.kill("SIGTERM"), 1500));
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => c.kill(s));
c.on("exit", (code, sig) => process.exit(code === null ? (sig === "SIGTERM" ? 0 : 1) : code));'

# record_acp records the ACP agent ACP_AGENT (default claude-code-acp, here;
# codex-acp, opencode, qwen-code and gemini in testdata/acp/agents/record.sh).
record_acp() {
  # shellcheck source=/dev/null
  source "$REPO/testdata/acp/agents/record.sh" # acp_agent_record, the other agents' recorders
  case ${ACP_AGENT:-claude-code-acp} in
    claude-code-acp) ;;
    codex-acp | opencode | qwen-code | gemini)
      "record_acp_${ACP_AGENT//-/_}"
      return
      ;;
    *) die "unknown ACP_AGENT '$ACP_AGENT': want claude-code-acp, codex-acp, opencode, qwen-code or gemini" ;;
  esac
  # shellcheck source=/dev/null
  source "$REPO/testdata/acp/agents/setup.sh"
  local agent_pkg=$CLAUDE_CODE_ACP_PKG
  local agent_version=$CLAUDE_CODE_ACP_VERSION
  local npm_dir=$REPO/.cache/npm-acp
  local agent_bin=$npm_dir/node_modules/.bin/claude-code-acp
  local script_src=$REPO/testdata/acp/scenarios/$SCENARIO.json
  local out=${RECORD_OUT:-$REPO/testdata/acp/$SCENARIO.ndjson}

  [ -f "$script_src" ] || die "no model script $script_src"
  need_tools

  # 1. The agent, pinned.
  npm_pinned "$agent_pkg" "$agent_version" "$npm_dir" "$agent_bin"
  local sdk_json=$npm_dir/node_modules/@anthropic-ai/claude-agent-sdk/package.json
  local sdk_version=unknown cli_version=unknown
  if [ -f "$sdk_json" ]; then
    sdk_version=$(jq -r .version "$sdk_json")
    cli_version=$(jq -r '.claudeCodeVersion // "unknown"' "$sdk_json")
  fi

  # 2. Temp HOME and workspace.
  TMP=$(mktemp -d)
  local home=$TMP/home ws=${SHARED_WS:-$TMP/ws}
  mkdir -p "$home"
  init_workspace "$ws"

  # Optional agent settings from the scenario: a script in the object form
  # ({"replies": [...]}) may carry "claudeSettings", written to the agent's
  # $HOME/.claude/settings.json (e.g. permission allow rules, since the host
  # cannot answer session/request_permission yet).
  if jq -e 'type == "object" and has("claudeSettings")' "$script_src" >/dev/null; then
    mkdir -p "$home/.claude"
    jq '.claudeSettings' "$script_src" >"$home/.claude/settings.json"
  fi

  # 3. The model server.
  start_modelserver anthropic "$script_src" "$ws"

  # 4. Record through baton.
  read_client_side "$REPO/testdata/acp" 
  local -a agent_env=(env -i)
  mapfile -t -O 2 agent_env < <(claude_code_acp_env "$home" "$MS_URL")
  # "claudeEnv" in the script: more env for the agent (as for claude: a
  # made-up CLAUDE_CODE_OAUTH_TOKEN signs it in to a plan, in place of the
  # API key, so that it reads the unified rate-limit headers).
  local auth="ANTHROPIC_API_KEY (made up)"
  if jq -e 'type == "object" and has("claudeEnv")' "$script_src" >/dev/null; then
    local -a extra=() kept=()
    local e
    mapfile -t extra < <(jq -r '.claudeEnv | to_entries[] | "\(.key)=\(.value)"' "$script_src")
    if printf '%s\n' "${extra[@]}" | grep -q '^CLAUDE_CODE_OAUTH_TOKEN='; then
      for e in "${agent_env[@]}"; do
        [ "${e%%=*}" = ANTHROPIC_API_KEY ] || kept+=("$e")
      done
      agent_env=("${kept[@]}")
      auth="CLAUDE_CODE_OAUTH_TOKEN (made up: a plan's sign-in)"
    fi
    agent_env+=("${extra[@]}")
  fi
  # claude-code-acp never exits when its stdin closes (it calls
  # process.stdin.resume()); it has to be stopped with SIGTERM. replaypeer
  # record does that only after its own 3 s grace period, and the ACP plugin
  # stops replaypeer with SIGTERM after the same 3 s grace, so replaypeer died
  # first: the transcript had no runtime_exit entry and the agent (and its
  # `claude` child) were left running as orphans. This small node wrapper
  # passes stdin through and sends the agent SIGTERM as soon as stdin ends, so
  # the agent "exits when the client closes its stdin" — which is exactly the
  # runtime_exit the replay peer reproduces. stdout/stderr are the agent's own
  # (not piped through the wrapper), so the frames are unchanged
  # (ACP_STDIN_EOF_WRAPPER).

  acp_agent_record claude-code-acp "$home" "$ws" \
    "agent=$agent_pkg" "agentVersion=$agent_version" \
    "claudeAgentSdkVersion=$sdk_version" "claudeCodeVersion=$cli_version" \
    "model=baton-modelserver (scripted)" "auth=$auth" \
    "agentStop=SIGTERM 1.5 s after its stdin closes, once it has saved its session (node wrapper in testdata/record.sh)" \
    -- "${agent_env[@]}" node -e "$ACP_STDIN_EOF_WRAPPER" "$agent_bin"
}

# start_modelserver API SCRIPT_SRC WS starts bin/baton-modelserver serving API
# with SCRIPT_SRC ("{{CWD}}" replaced by WS) on 127.0.0.1; it sets MS_URL
# and REPLIES (how many replies the script has).
start_modelserver() {
  local api=$1 script_src=$2 ws=$3 i
  sed "s|{{CWD}}|$ws|g" "$script_src" >"$TMP/script.json"
  REPLIES=$(jq 'if type == "object" then .replies else . end | length' "$TMP/script.json") ||
    die "model script $script_src is not JSON"
  "$BIN/baton-modelserver" --api "$api" --script "$TMP/script.json" --addr 127.0.0.1:0 \
    --log "$TMP/model-requests.jsonl" >"$TMP/modelserver.out" 2>"$TMP/modelserver.err" &
  MS_PID=$!
  MS_URL=
  for i in $(seq 100); do
    # The server may not have created its output file yet (and under
    # set -e a failed assignment would end the script).
    MS_URL=$(sed -n '1s/^listening on //p' "$TMP/modelserver.out" 2>/dev/null) || true
    [ -n "$MS_URL" ] && break
    kill -0 "$MS_PID" 2>/dev/null || { cat "$TMP/modelserver.err" >&2; die "baton-modelserver exited"; }
    sleep 0.1
  done
  [ -n "$MS_URL" ] || die "baton-modelserver did not report its address"
  case $MS_URL in http://127.0.0.1:*) ;; *) die "unexpected model server address: $MS_URL" ;; esac
}

# record_codex records `codex app-server` (pinned @openai/codex) through
# bin/baton-plugin-codex:
#   - codex's HOME and CODEX_HOME are a temp directory under .cache/ (codex
#     refuses to set up its apply_patch helper under /tmp); the workspace is
#     a temp git repository;
#   - $CODEX_HOME/config.toml points codex at the scripted model server (a
#     custom model provider "baton", Responses API) and switches off what
#     would go to the internet (plugin sync, analytics, feedback, OTel,
#     update checks); HTTPS_PROXY=http://127.0.0.1:9 catches anything else;
#   - the model is "baton-scripted", described by a one-model catalog
#     generated from codex's bundled gpt-5.5 entry (`codex debug models
#     --bundled`): that model gets apply_patch and the multi_agent_v1 tools
#     directly (no tool_search), which the scenarios call;
#   - expect_outbound frames keep what the plugin sends except its own
#     version (clientInfo.version becomes "<any>"); inbound frames stay as
#     codex sent them (temp paths redacted by replaypeer).
record_codex() {
  # shellcheck source=/dev/null
  source "$REPO/testdata/acp/agents/setup.sh" # codex_provider_toml
  local codex_pkg=@openai/codex
  local codex_version=0.171.0
  local protocol='codex-app-server/v2' transport='json-rpc ndjson stdio' # the plugin's wire protocol (Describe)
  local npm_dir=$REPO/.cache/npm-codex
  local codex_bin=$npm_dir/node_modules/.bin/codex
  local script_src=$REPO/testdata/codex/scenarios/$SCENARIO.json
  local out=${RECORD_OUT:-$REPO/testdata/codex/$SCENARIO.ndjson}

  [ -f "$script_src" ] || die "no model script $script_src"
  need_tools

  # 1. codex, pinned.
  npm_pinned "$codex_pkg" "$codex_version" "$npm_dir" "$codex_bin"

  # 2. Temp CODEX_HOME (not under /tmp) and workspace.
  mkdir -p "$REPO/.cache"
  TMP=$(mktemp -d "$REPO/.cache/codex-rec-XXXX")
  WS_TMP=$(mktemp -d)
  local home=$TMP/home ws=${SHARED_WS:-$WS_TMP/ws}
  local codex_home=$home/.codex
  mkdir -p "$codex_home"
  init_workspace "$ws"

  local -a codex_env=(
    env -i
    "PATH=$PATH"
    "HOME=$home"
    "CODEX_HOME=$codex_home"
    BATON_FAKE_KEY=sk-test-redacted
    LANG=C.UTF-8
    TERM=dumb
    RUST_LOG=warn
    HTTPS_PROXY=http://127.0.0.1:9
    HTTP_PROXY=http://127.0.0.1:9
    ALL_PROXY=http://127.0.0.1:9
    NO_PROXY=127.0.0.1,localhost
  )

  # The model catalog: codex's bundled gpt-5.5 entry as "baton-scripted".
  "${codex_env[@]}" "$codex_bin" debug models --bundled >"$TMP/bundled-models.json" ||
    die "codex debug models --bundled failed"
  jq '{models: [.models[] | select(.slug == "gpt-5.5")
        | .slug = "baton-scripted" | .display_name = "Baton scripted" | .description = "Scripted stand-in model"
        | .priority = 1 | .supports_search_tool = false | .upgrade = null
        | .service_tiers = [] | .additional_speed_tiers = []]}' \
    "$TMP/bundled-models.json" >"$TMP/catalog.json"
  jq -e '.models | length == 1' "$TMP/catalog.json" >/dev/null || die "codex has no bundled gpt-5.5 model entry"

  # 3. The model server, and codex's config pointing at it.
  start_modelserver openai-responses "$script_src" "$ws"
  cat >"$codex_home/config.toml" <<TOML
model = "baton-scripted"
model_catalog_json = "$TMP/catalog.json"
model_provider = "baton"
check_for_update_on_startup = false

$(codex_provider_toml "$MS_URL")
TOML

  # 4. Record through baton.
  read_client_side "$REPO/testdata/codex"
  local -a argv=(
    env "HOME=$home"
    "$BIN/replaypeer" record --append
    --out "$TMP/transcript.ndjson"
    --provider codex
    --protocol "$protocol"
    --meta "transport=$transport"
    --scenario "$SCENARIO"
    --workspace "$ws"
    --meta "agent=$codex_pkg"
    --meta "agentVersion=$codex_version"
    --meta "model=baton-scripted: baton-modelserver --api openai-responses (scripted)"
    --meta "modelScript=testdata/codex/scenarios/$SCENARIO.json"
    --meta "capturedBy=make record"
    --
    "${codex_env[@]}"
    "$codex_bin" app-server
  )
  local cmd= w
  for w in "${argv[@]}"; do cmd+="${cmd:+ }$(quote "$w")"; done
  record_and_verify codex "$ws" "$cmd" "$out"
}

# read_client_side DIR sets what the client does in the scenario: the steps
# of DIR/SCENARIO.steps.json (sent with `baton run --script`: sends in a
# dispatch mode, waits, interrupts, answers), or else the lines of
# DIR/SCENARIO.messages (msgs).
read_client_side() {
  local dir=$1 line
  STEPS= msgs=()
  [ -n "$SWITCH" ] && return # a switch's client is its Go test; a parallel run's, live_worktrees
  if [ -f "$dir/$SCENARIO.steps.json" ]; then
    STEPS=$dir/$SCENARIO.steps.json
    return
  fi
  [ -f "$dir/$SCENARIO.messages" ] || die "no $dir/$SCENARIO.steps.json or $dir/$SCENARIO.messages"
  while IFS= read -r line || [ -n "$line" ]; do
    [ -n "$line" ] && msgs+=("$line")
  done <"$dir/$SCENARIO.messages"
  [ ${#msgs[@]} -gt 0 ] || die "$dir/$SCENARIO.messages has no messages"
}

# add_mcp_servers PROVIDER DATA WS configures the run's MCP servers in DATA
# with `baton mcp add`, one a line of testdata/PROVIDER/SCENARIO.mcp (split
# into words as a shell would; {{CWD}} is the workspace). The test MCP
# server, host/internal/testbin/mcptool, is on the agent's PATH as mcptool.
add_mcp_servers() {
  local provider=$1 data=$2 ws=$3 line
  local -a add
  local file
  file=$(case_file "$provider" mcp)
  [ -f "$file" ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    [ -n "$line" ] || continue
    line=${line//\{\{CWD\}\}/$ws}
    eval "add=($line)"
    "$BIN/baton" --data "$data" mcp add "${add[@]}" >/dev/null || return $?
  done <"$file"
}

# check_mcp_evidence PROVIDER WS: a scenario whose MCP server leaves
# evidence (MCPTOOL_EVIDENCE) recorded a tool call that reached it.
check_mcp_evidence() {
  local provider=$1 ws=$2
  grep -q MCPTOOL_EVIDENCE "$(case_file "$provider" mcp)" 2>/dev/null || return 0
  [ -s "$ws/mcp-evidence.txt" ] || { KEEP_TMP=1; die "the MCP tool was never called (no $ws/mcp-evidence.txt; logs kept in $TMP)"; }
  echo "record.sh: live: the MCP tool ran: $(head -n 1 "$ws/mcp-evidence.txt")" >&2
}

# run_baton PROVIDER DATA WS CMD OUT ERR plays the client side through baton
# run. With STEPS, one invocation runs the script. Otherwise the messages
# are sent one invocation per group: a "---" line in the messages file ends
# a group, and the next group continues the thread with --thread, so the
# provider is started again and resumes its session (the recorder appends
# to the same transcript; a replay keeps its cursor in a --state file).
run_baton() {
  local provider=$1 data=$2 ws=$3 cmd=$4 out=$5 err=$6 thread= m flags_file
  local -a group=() flags=()
  if [ -n "$RESTART" ]; then
    run_baton_restart "$@"
    return $?
  fi
  # testdata/PROVIDER/SCENARIO.flags: more flags for the baton run that
  # creates the thread (e.g. --approve accept --on-limit wait), split into
  # words as a shell would (quotes keep a check command whole).
  flags_file=$(case_file "$provider" flags)
  if [ -f "$flags_file" ]; then
    eval "flags=($(<"$flags_file"))"
  fi
  add_mcp_servers "$provider" "$data" "$ws" || return $?
  : >"$out"
  if [ -n "$STEPS" ]; then
    "$BIN/baton" run --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" --cwd "$ws" --provider "$provider" \
      --provider-command "$cmd" "${flags[@]}" --script "$STEPS" >>"$out" 2>>"$err" </dev/null
    return $?
  fi
  for m in "${msgs[@]}" "---"; do
    if [ "$m" != "---" ]; then
      group+=("$m")
      continue
    fi
    [ ${#group[@]} -gt 0 ] || continue
    if [ -z "$thread" ]; then
      "$BIN/baton" run --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" --cwd "$ws" --provider "$provider" \
        --provider-command "$cmd" "${flags[@]}" "${group[@]}" >>"$out" 2>>"$err" </dev/null || return $?
      thread=$(sed -n 's/.*--thread \(thr_[0-9a-z]*\)).*/\1/p' "$out" | tail -n 1)
      [ -n "$thread" ] || { echo "record.sh: no thread id in baton's output" >&2; return 1; }
    else
      # A recorder may need time to pass before the provider starts again
      # (record_acp_gemini: gemini-cli names its session file by the minute).
      [ -z "$BEFORE_RESUME" ] || "$BEFORE_RESUME"
      "$BIN/baton" run --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" --thread "$thread" \
        "${group[@]}" >>"$out" 2>>"$err" </dev/null || return $?
    fi
    group=()
  done
}

STEPS=
msgs=()
BEFORE_RESUME=
MS_PID=
MS_URL=
REPLIES=
TMP=
WS_TMP=
KEEP_TMP=${KEEP_TMP:-}
SWITCH=
SHARED_WS=
CASE_DIR=
RESTART=
RUN_PID=
SERVE_PID=
SW_MS_PIDS=()
SW_DIRS=()

stop_modelserver() {
  local pid
  for pid in "$MS_PID" "${SW_MS_PIDS[@]}"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  MS_PID= SW_MS_PIDS=()
}

cleanup() {
  local pid
  for pid in "$RUN_PID" "$SERVE_PID"; do # a restart scenario's (testdata/record_restart.sh)
    [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true # it may have ended already
  done
  stop_modelserver
  local d
  for d in "$TMP" "$WS_TMP" "${SW_DIRS[@]}"; do
    [ -n "$d" ] || continue
    if [ -n "$KEEP_TMP" ]; then
      echo "record.sh: kept $d" >&2
    else
      rm -rf "$d"
    fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# load_provider P sources testdata/P/record.sh (where a provider's
# recording may live, beside its transcripts) and checks record_P exists.
load_provider() {
  if [ -f "$REPO/testdata/$1/record.sh" ]; then
    # shellcheck source=/dev/null
    source "$REPO/testdata/$1/record.sh"
  fi
  declare -F "record_$1" >/dev/null ||
    die "unknown provider '$1' (no record_$1 in testdata/record.sh or testdata/$1/record.sh)"
}

[ -z "$RECORD_SOURCED" ] || return 0

case $PROVIDER in
  *,*)
    # shellcheck source=/dev/null
    source "$REPO/testdata/live_worktrees.sh"
    live_worktrees
    ;;
  *+*)
    # shellcheck source=/dev/null
    source "$REPO/testdata/record_switch.sh"
    record_switch
    ;;
  *)
    case $SCENARIO in
      *_restart)
        # The host is killed during the run's wait and started again:
        # see testdata/record_restart.sh.
        RESTART=1
        # shellcheck source=/dev/null
        source "$REPO/testdata/record_restart.sh"
        ;;
    esac
    load_provider "$PROVIDER"
    "record_$PROVIDER"
    ;;
esac
