# shellcheck shell=bash
# record_claude records Claude Code (`claude -p` with stream-json both ways,
# pinned @anthropic-ai/claude-code) through bin/baton-plugin-claude. Sourced
# by testdata/record.sh, whose helpers it uses.
#   - the CLI's HOME is a temp directory; the workspace a temp git
#     repository; ANTHROPIC_BASE_URL points at the scripted model server
#     (--api anthropic) and the env below keeps the CLI off the internet
#     (see .notes/acp-agent-probe.md and .notes/claude-probe.md);
#   - the provider command is `replaypeer record --invocation ... -- env ...
#     claude --`: the plugin appends its arguments after the last "--" and
#     the recorder keeps them as the transcript's invocation frame, so a
#     replay checks them;
#   - the uuid the plugin gives each user message is random: it becomes
#     "<any>" in the expect_outbound frames (postprocess_claude), as is
#     the session's own --mcp-config file (a scenario's MCP servers,
#     SCENARIO.mcp, are added with baton mcp add: record.sh).
record_claude() {
  local pkg=@anthropic-ai/claude-code
  local version=2.1.332
  local protocol='claude-code/stream-json' transport='ndjson stdio' # the plugin's wire protocol (Describe)
  local npm_dir=$REPO/.cache/npm-claude
  local claude_bin=$npm_dir/node_modules/.bin/claude
  local script_src=$REPO/testdata/claude/scenarios/$SCENARIO.json
  local out=${RECORD_OUT:-$REPO/testdata/claude/$SCENARIO.ndjson}

  [ -f "$script_src" ] || die "no model script $script_src"
  need_tools

  # 1. The CLI, pinned.
  npm_pinned "$pkg" "$version" "$npm_dir" "$claude_bin"

  # 2. Temp HOME and workspace.
  TMP=$(mktemp -d)
  local home=$TMP/home ws=${SHARED_WS:-$TMP/ws}
  mkdir -p "$home"
  init_workspace "$ws"

  # 3. The model server.
  start_modelserver anthropic "$script_src" "$ws"

  # 4. Record through baton.
  read_client_side "$REPO/testdata/claude"
  local -a claude_env=(
    env -i
    "PATH=$PATH"
    "HOME=$home"
    "ANTHROPIC_BASE_URL=$MS_URL"
    ANTHROPIC_API_KEY=sk-test-redacted
    DISABLE_TELEMETRY=1
    DISABLE_ERROR_REPORTING=1
    DISABLE_AUTOUPDATER=1
    DISABLE_BUG_COMMAND=1
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
    CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1
    CLAUDE_CODE_DISABLE_FAST_MODE=1
  )
  # A script in the object form may carry "claudeEnv": more env for the
  # CLI. A scenario that needs a plan's limits sets CLAUDE_CODE_OAUTH_TOKEN
  # (made up; the CLI reads the unified rate-limit headers only when signed
  # in to a plan, .notes/claude-probe.md): it replaces the API key.
  local auth="ANTHROPIC_API_KEY (made up)"
  if jq -e 'type == "object" and has("claudeEnv")' "$script_src" >/dev/null; then
    local -a extra=()
    mapfile -t extra < <(jq -r '.claudeEnv | to_entries[] | "\(.key)=\(.value)"' "$script_src")
    if printf '%s\n' "${extra[@]}" | grep -q '^CLAUDE_CODE_OAUTH_TOKEN='; then
      local -a kept=() e
      for e in "${claude_env[@]}"; do
        [ "${e%%=*}" = ANTHROPIC_API_KEY ] || kept+=("$e")
      done
      claude_env=("${kept[@]}")
      auth="CLAUDE_CODE_OAUTH_TOKEN (made up: a plan's sign-in)"
    fi
    claude_env+=("${extra[@]}")
  fi
  local -a argv=(
    env "HOME=$home"
    "$BIN/replaypeer" record --append --invocation
    --out "$TMP/transcript.ndjson"
    --provider claude
    --protocol "$protocol"
    --meta "transport=$transport"
    --scenario "$SCENARIO"
    --workspace "$ws"
    --meta "agent=$pkg"
    --meta "agentVersion=$version"
    --meta "model=baton-modelserver --api anthropic (scripted)"
    --meta "modelScript=testdata/claude/scenarios/$SCENARIO.json"
    --meta "auth=$auth"
    --meta "capturedBy=make record"
    --
    "${claude_env[@]}"
    "$claude_bin"
    --
  )
  local cmd= w
  for w in "${argv[@]}"; do cmd+="${cmd:+ }$(quote "$w")"; done
  record_and_verify claude "$ws" "$cmd" "$out"
}

# postprocess_claude FILE: the plugin's user messages carry a random uuid;
# any uuid matches on replay. The CLI names the workspace by its path with
# "/" and "." made "-" (its projects directory, a task's output file): that
# temp name becomes "-workspace".
postprocess_claude() {
  local slug=${ws//[\/.]/-}
  jq -c 'if .type == "expect_outbound" and .frame.type == "user" and (.frame | has("uuid"))
         then .frame.uuid = "<any>" else . end
       | if .type == "expect_outbound" and (.frame.argv // [] | index(["--mcp-config"])) != null
         then .frame.argv[(.frame.argv | index(["--mcp-config"])) + 1] = "<any>" else . end' "$1" |
    sed "s|$slug|-workspace|g" >"$1.tmp" && mv "$1.tmp" "$1"
}
