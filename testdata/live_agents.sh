#!/usr/bin/env bash
# live_agents.sh [ID...] — a live test of `baton run --agent ID` (part of
# `make live-test`, not of `make test`): for each ACP agent (default
# claude-code-acp codex-acp opencode qwen-code) it
#   1. writes a one-agent ACP Registry file whose entry is an npx
#      distribution pinned to the version the recorder pins
#      (testdata/acp/agents/setup.sh; opencode's real registry entry is a
#      binary archive: here opencode-ai at that version with args ["acp"]);
#   2. runs `baton agents install ID --registry FILE` into a temp data dir
#      (a real npm install from the package registry);
#   3. starts bin/baton-modelserver with the agent's `simple` model script
#      (testdata/acp/scenarios/simple.json for claude-code-acp, else
#      testdata/acp/agents/ID/scenarios/simple.json) and writes the agent's
#      offline settings into a temp HOME, as the recorder does (the same
#      functions: testdata/record.sh sourced, testdata/acp/agents/setup.sh);
#   4. runs `baton run --agent ID --approve decline --cwd WS "Say hello."`
#      with the agent's offline environment as baton's own (the ACP plugin
#      passes its environment on to the agent), and checks that it exits 0,
#      that the model server's one scripted reply was consumed and that
#      `baton show --json THREAD` has the scripted answer and
#      providerCommand.agent == ID;
#   5. `baton agents remove ID`.
# One line per agent: "live_agents: ID VERSION ok (...)" or the failure,
# with its logs. The model server listens on 127.0.0.1 only; the agents'
# keys are made up.
set -euo pipefail

# shellcheck source=/dev/null
source "$(dirname "$0")/record.sh" # helpers only when sourced
# shellcheck source=/dev/null
source "$REPO/testdata/acp/agents/setup.sh"

for b in baton baton-plugin-acp baton-modelserver; do
  [ -x "$BIN/$b" ] || die "$BIN/$b is missing; run: make live-test"
done
need_tools

SCENARIO=simple
AGENTS=("$@")
[ ${#AGENTS[@]} -gt 0 ] || AGENTS=(claude-code-acp codex-acp opencode qwen-code gemini)

# live_agent ID runs the test for agent ID; its temp directory is TMP.
live_agent() {
  local id=$1 pkg version api args='[]' script_src
  case $id in
    claude-code-acp) pkg=$CLAUDE_CODE_ACP_PKG version=$CLAUDE_CODE_ACP_VERSION api=anthropic ;;
    codex-acp) pkg=$CODEX_ACP_PKG version=$CODEX_ACP_VERSION api=openai-responses ;;
    opencode) pkg=$OPENCODE_PKG version=$OPENCODE_VERSION api=anthropic args='["acp"]' ;;
    qwen-code) pkg=$QWEN_CODE_PKG version=$QWEN_CODE_VERSION api=anthropic args='["--acp"]' ;;
    gemini) pkg=$GEMINI_CLI_PKG version=$GEMINI_CLI_VERSION api=gemini args='["--acp"]' ;;
    *) die "unknown agent '$id'" ;;
  esac
  if [ "$id" = claude-code-acp ]; then
    script_src=$REPO/testdata/acp/scenarios/simple.json
  else
    script_src=$REPO/testdata/acp/agents/$id/scenarios/simple.json
  fi
  [ -f "$script_src" ] || die "no model script $script_src"
  local want
  want=$(jq -r '(if type == "object" then .replies else . end)[0] | if type == "object" then .content else . end | map(select(.type == "text") | .text) | join("")' "$script_src")

  # codex will not set up its helpers under /tmp: every agent's temp
  # directory is under .cache.
  mkdir -p "$REPO/.cache"
  TMP=$(mktemp -d "$REPO/.cache/live-$id-XXXX")
  local data=$TMP/data home=$TMP/home ws=$TMP/ws reg=$TMP/registry.json
  mkdir -p "$home"
  init_workspace "$ws"

  # 1. The registry: one npx entry, pinned.
  jq -n --arg id "$id" --arg pkg "$pkg" --arg v "$version" --argjson args "$args" '{
    version: "1.0.0",
    agents: [{id: $id, name: $id, version: $v, description: "pinned for the live test",
      distribution: {npx: ({package: "\($pkg)@\($v)"} + (if $args == [] then {} else {args: $args} end))}}]
  }' >"$reg"

  # 2. Install.
  "$BIN/baton" agents install "$id" --registry "$reg" --data "$data" >"$TMP/install.out" 2>&1 ||
    { cat "$TMP/install.out" >&2; return 1; }

  # 3. The model server and the agent's offline settings and environment.
  start_modelserver "$api" "$script_src" "$ws"
  local -a agent_env=()
  case $id in
    claude-code-acp) mapfile -t agent_env < <(claude_code_acp_env "$home" "$MS_URL") ;;
    codex-acp)
      codex_acp_config "$home/.codex" "$MS_URL"
      mapfile -t agent_env < <(codex_acp_env "$home" "$home/.codex")
      ;;
    opencode)
      local plugin_dir=$REPO/.cache/npm-opencode-plugin
      npm_pinned @opencode-ai/plugin "$version" "$plugin_dir" "$plugin_dir/node_modules/@opencode-ai/plugin"
      opencode_config "$home/xdg" "$MS_URL" "$plugin_dir"
      mapfile -t agent_env < <(opencode_env "$home" "$home/xdg")
      ;;
    qwen-code)
      qwen_code_settings "$home"
      mapfile -t agent_env < <(qwen_code_env "$home" "$MS_URL")
      ;;
    gemini)
      gemini_cli_settings "$home"
      mapfile -t agent_env < <(gemini_cli_env "$home" "$MS_URL")
      ;;
  esac

  # 4. The run, with the agent's environment as baton's.
  local rc=0 start=$SECONDS
  env -i "${agent_env[@]}" "$BIN/baton" run --log-level warn --data "$data" --agent "$id" \
    --approve decline --cwd "$ws" "Say hello." >"$TMP/run.out" 2>"$TMP/run.err" </dev/null || rc=$?
  local took=$((SECONDS - start))
  stop_modelserver
  if [ "$rc" -ne 0 ]; then
    cat "$TMP/run.out" "$TMP/run.err" "$TMP/modelserver.err" >&2
    echo "live_agents: $id: baton run --agent exited with status $rc" >&2
    return 1
  fi
  local consumed
  consumed=$(sed -n 's/.*stopped; \([0-9]*\) script replies consumed.*/\1/p' "$TMP/modelserver.err")
  [ "$consumed" = "$REPLIES" ] || {
    cat "$TMP/run.out" "$TMP/modelserver.err" >&2
    echo "live_agents: $id: the agent consumed ${consumed:-?} of $REPLIES scripted replies" >&2
    return 1
  }
  local thread
  thread=$(sed -n 's/.*--thread \(thr_[0-9a-z]*\)).*/\1/p' "$TMP/run.out" | tail -n 1)
  [ -n "$thread" ] || { cat "$TMP/run.out" >&2; echo "live_agents: $id: no thread id in baton's output" >&2; return 1; }
  "$BIN/baton" show --json --data "$data" "$thread" >"$TMP/show.json" 2>"$TMP/show.err" ||
    { cat "$TMP/show.err" >&2; return 1; }
  local agent
  agent=$(jq -r '.providerCommand.agent // empty' "$TMP/show.json" | head -n 1)
  [ "$agent" = "$id" ] || { echo "live_agents: $id: providerCommand.agent is '$agent'" >&2; return 1; }
  grep -qF "$want" "$TMP/show.json" || {
    echo "live_agents: $id: baton show --json has no \"$want\" (kept in $TMP)" >&2
    KEEP_TMP=1
    return 1
  }
  local got_version
  got_version=$(jq -r '.providerCommand.agentVersion // empty' "$TMP/show.json" | head -n 1)

  # 5. Remove.
  "$BIN/baton" agents remove "$id" --data "$data" >"$TMP/remove.out" 2>&1 ||
    { cat "$TMP/remove.out" >&2; return 1; }
  echo "live_agents: $id $got_version ok (baton run --agent ${took}s, answer \"$want\", thread $thread)"
}

failed=0
for id in "${AGENTS[@]}"; do
  if ! live_agent "$id"; then
    echo "live_agents: $id FAILED (logs in ${TMP#"$REPO"/})"
    KEEP_TMP=1
    failed=1
  fi
  [ -n "$KEEP_TMP" ] || rm -rf "$TMP"
  TMP=
done
exit "$failed"
