# Recording ACP agents other than claude-code-acp: sourced by
# testdata/record.sh (record_acp) for `make record PROVIDER=acp
# ACP_AGENT=ID SCENARIO=NAME`, ID one of:
#
#   codex-acp  @zed-industries/codex-acp (codex inside), against the scripted
#              OpenAI Responses API (baton-modelserver --api openai-responses);
#   opencode   opencode-ai run as `opencode acp`, against the scripted
#              Anthropic Messages API (baton-modelserver --api anthropic);
#   qwen-code  @qwen-code/qwen-code run as `qwen --acp`, against the scripted
#              Anthropic Messages API (its auth type anthropic, chosen by
#              ANTHROPIC_* in its environment);
#   gemini     @google/gemini-cli run as `gemini --acp`, against the scripted
#              Gemini API (baton-modelserver --api gemini; its auth type
#              gateway, chosen by GOOGLE_GEMINI_BASE_URL).
#
# For agent ID and scenario NAME:
#   - the model script is testdata/acp/agents/ID/scenarios/NAME.json, in the
#     shape of the API the agent's backend speaks ("{{CWD}}" is the
#     workspace). In its object form ({"replies": [...]}) it may carry the
#     agent's own settings for the scenario: "codexConfig", TOML lines put
#     into codex's config.toml after its top-level keys; "opencodeConfig", a
#     JSON object merged into opencode.json; "qwenSettings", a JSON object
#     merged into qwen-code's ~/.qwen/settings.json; "geminiSettings", a
#     JSON object merged into gemini-cli's ~/.gemini/settings.json;
#   - the client side (NAME.steps.json or NAME.messages, and NAME.flags,
#     NAME.exit, NAME.mcp) is testdata/acp/agents/ID's where it has the file,
#     else testdata/acp's (the claude-code-acp scenarios);
#   - the transcript goes to testdata/acp/agents/ID/NAME.ndjson (or
#     RECORD_OUT), recorded through bin/baton-plugin-acp as for
#     claude-code-acp, its header naming the agent package and its exact
#     version.
#
# Nothing goes to the internet: the model server is on 127.0.0.1, every
# update check, telemetry and model-list fetch the agents have a switch for
# is off, codex's HTTP(S)_PROXY is a closed port on 127.0.0.1, and
# opencode's plugin package is installed beforehand (strace -f -e connect
# of a recording shows connections to 127.0.0.1 only). See
# .notes/acp-agents.md.

# shellcheck source=/dev/null
source "$REPO/testdata/acp/agents/setup.sh"

# acp_agent_case ID sets what every agent's recording shares: AGENT_DIR,
# script_src, out and CASE_DIR (the client side's directory), and reads the
# client side.
acp_agent_case() {
  local id=$1
  AGENT_DIR=$REPO/testdata/acp/agents/$id
  script_src=$AGENT_DIR/scenarios/$SCENARIO.json
  out=${RECORD_OUT:-$AGENT_DIR/$SCENARIO.ndjson}
  [ -f "$script_src" ] || die "no model script $script_src"
  need_tools
  CASE_DIR=$AGENT_DIR
  if [ -f "$AGENT_DIR/$SCENARIO.steps.json" ] || [ -f "$AGENT_DIR/$SCENARIO.messages" ]; then
    read_client_side "$AGENT_DIR"
  else
    read_client_side "$REPO/testdata/acp"
  fi
}

# acp_agent_dirs ID makes the recording's temp directories: TMP under
# .cache/ (codex will not set up its helpers under /tmp), the agent's HOME
# in it, and a temp git workspace; it sets TMP, WS_TMP and the caller's
# home and ws.
acp_agent_dirs() {
  mkdir -p "$REPO/.cache"
  TMP=$(mktemp -d "$REPO/.cache/$1-acp-rec-XXXX")
  WS_TMP=$(mktemp -d)
  home=$TMP/home ws=$WS_TMP/ws
  mkdir -p "$home"
  init_workspace "$ws"
}

# acp_script_path ID is the model script of agent ID's $SCENARIO, from the
# repository's root: claude-code-acp's beside the standard transcripts,
# another agent's in its own directory.
acp_script_path() {
  if [ "$1" = claude-code-acp ]; then
    echo "testdata/acp/scenarios/$SCENARIO.json"
  else
    echo "testdata/acp/agents/$1/scenarios/$SCENARIO.json"
  fi
}

# acp_agent_record ID HOME WS META... -- AGENT_ARGV... records AGENT_ARGV
# (the agent with its environment) through replaypeer and baton, with the
# header metadata META (key=value) after the shared ones.
acp_agent_record() {
  local id=$1 home=$2 ws=$3
  shift 3
  local -a meta=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    meta+=(--meta "$1")
    shift
  done
  [ "${1:-}" = -- ] || die "acp_agent_record: no -- before the agent's command"
  shift
  local protocol='acp/1' transport='json-rpc ndjson stdio' # the plugin's wire protocol (Describe)
  # replaypeer runs with HOME set to the agent's temp HOME so that its
  # redactor replaces that path (should it show up in a frame) by /home/user.
  local -a argv=(
    env "HOME=$home"
    "$BIN/replaypeer" record --append
    --out "$TMP/transcript.ndjson"
    --provider acp
    --protocol "$protocol"
    --meta "transport=$transport"
    --scenario "$SCENARIO"
    --workspace "$ws"
    --meta "acpAgent=$id"
    "${meta[@]}"
    --meta "modelScript=$(acp_script_path "$id")"
    --meta "capturedBy=make record"
    --
    "$@"
  )
  local cmd= w
  for w in "${argv[@]}"; do cmd+="${cmd:+ }$(quote "$w")"; done
  record_and_verify acp "$ws" "$cmd" "$out"
}

# record_acp_codex_acp records @zed-industries/codex-acp:
#   - its HOME and CODEX_HOME are a temp directory under .cache/ (codex
#     will not set up its helper binaries under /tmp); the workspace is a
#     temp git repository;
#   - $CODEX_HOME/config.toml points codex at the scripted model server (a
#     model provider "baton", Responses API, whose base_url is the model
#     server) and switches off update checks, analytics, feedback, OTel,
#     plugins and web search, as record_codex does; HTTPS_PROXY is a closed
#     port on 127.0.0.1, for anything else;
#   - the model is gpt-5.5, a model codex knows (its own metadata: the
#     apply_patch tool, no "model metadata not found" warning in the
#     transcript), served by the "baton" provider, so the scripted server;
#   - codex-acp does not exit when its stdin closes: it runs in the node
#     wrapper claude-code-acp runs in (ACP_STDIN_EOF_WRAPPER), which stops it
#     with SIGTERM 1.5 s after its stdin ends.
# The npm package runs the platform package's binary through a node
# script; the recording runs that binary itself (a SIGTERM reaches it).
record_acp_codex_acp() {
  local pkg=$CODEX_ACP_PKG version=$CODEX_ACP_VERSION
  local npm_dir=$REPO/.cache/npm-codex-acp
  local script_src out
  acp_agent_case codex-acp

  # 1. codex-acp, pinned, and the binary its node script would run.
  npm_pinned "$pkg" "$version" "$npm_dir" "$npm_dir/node_modules/.bin/codex-acp"
  local plat
  plat=$(node -p 'process.platform + "-" + process.arch')
  local agent_bin=$npm_dir/node_modules/@zed-industries/codex-acp-$plat/bin/codex-acp
  [ -x "$agent_bin" ] || die "no codex-acp binary for $plat ($agent_bin)"

  # 2. Temp HOME and CODEX_HOME (not under /tmp) and workspace.
  local home ws
  acp_agent_dirs codex-acp
  local codex_home=$home/.codex
  mkdir -p "$codex_home"

  # 3. The model server, and codex's config pointing at it.
  start_modelserver openai-responses "$script_src" "$ws"
  local extra
  extra=$(jq -r 'if type == "object" and has("codexConfig") then .codexConfig | if type == "array" then join("\n") else . end else "" end' "$TMP/script.json")
  codex_acp_config "$codex_home" "$MS_URL" "$extra"

  # 4. Record through baton.
  local -a agent_env=(env -i)
  mapfile -t -O 2 agent_env < <(codex_acp_env "$home" "$codex_home")
  ACP_CODEX_VERSION=0.137.0 # the codex inside 0.16.0: checked against its user-agent (postprocess_acp)
  acp_agent_record codex-acp "$home" "$ws" \
    "agent=$pkg" "agentVersion=$version" \
    "agentBinary=$pkg-$plat $version" "codexVersion=$ACP_CODEX_VERSION" \
    "model=gpt-5.5 on model provider baton: baton-modelserver --api openai-responses (scripted)" \
    "auth=none (a custom model provider: codex-acp asks for no login)" \
    "agentStop=SIGTERM 1.5 s after its stdin closes (node wrapper in testdata/record.sh)" \
    -- "${agent_env[@]}" node -e "$ACP_STDIN_EOF_WRAPPER" "$agent_bin"
}

# postprocess_acp FILE (record_and_verify calls it on the new transcript)
# checks that the codex inside codex-acp is the version the header names:
# the user-agent of its model requests says it.
#
# In turn_interrupt it also drops the available_commands_update the agent
# sends between the prompt and the client's session/cancel (qwen-code sends
# one as soon as the prompt arrives): the update makes no event, so no
# client step can wait for it, and a replay's cancel may overtake it (the
# same update was taken out of codex-acp's by hand).
postprocess_acp() {
  if [ "$SCENARIO" = turn_interrupt ]; then
    jq -c -s '
      (map(.type == "expect_outbound" and .frame.method == "session/prompt") | rindex(true)) as $p
      | (map(.type == "expect_outbound" and .frame.method == "session/cancel") | index(true)) as $c
      | to_entries
      | map(select(($p != null and $c != null and .key > $p and .key < $c
          and .value.type == "emit_inbound"
          and .value.frame.params.update.sessionUpdate == "available_commands_update") | not) | .value)
      | .[]' "$1" >"$1.tmp" && mv "$1.tmp" "$1"
  fi
  [ -n "$ACP_CODEX_VERSION" ] || return 0
  grep -q "codex_cli_rs/$ACP_CODEX_VERSION " "$TMP/model-requests.jsonl" || {
    KEEP_TMP=1
    die "codex-acp's model requests do not come from codex $ACP_CODEX_VERSION (see $TMP/model-requests.jsonl)"
  }
}
ACP_CODEX_VERSION=

# redact_acp FILE (record_and_verify calls it before its temp path check)
# replaces the agent's install directory ACP_NODE_MODULES, where it set one,
# by /usr/local/lib/node_modules: qwen-code's available_commands_update names
# the SKILL.md files of its bundled skills by absolute path.
redact_acp() {
  [ -n "$ACP_NODE_MODULES" ] || return 0
  local re
  re=$(printf '%s' "$ACP_NODE_MODULES" | sed 's/[][\\.*^$|/]/\\&/g')
  sed -i "s/$re/\/usr\/local\/lib\/node_modules/g" "$1"
}
ACP_NODE_MODULES=

# record_acp_opencode records opencode-ai as `opencode acp`:
#   - opencode's HOME and XDG_* directories are a temp directory (its
#     session store is $XDG_DATA_HOME/opencode/opencode.db: a resumed
#     session needs the same directories, so every baton invocation of one
#     recording shares them); the workspace is a temp git repository;
#   - $XDG_CONFIG_HOME/opencode/opencode.json points opencode at the
#     scripted model server (a provider "baton" on @ai-sdk/anthropic, whose
#     base URL is the model server) with model baton/scripted, and switches
#     off sharing, auto-update, LSP and formatters, as record_opencode does;
#     the script's "opencodeConfig" is merged into it (the permission rules
#     of approval_accept);
#   - on its start opencode installs @opencode-ai/plugin (its version) into
#     its config directory, from the npm registry, unless the directory's
#     package.json and package-lock.json already list it and it has a
#     node_modules: the recorder installs it once with npm into .cache/ and
#     gives opencode those files (node_modules a symlink), so that opencode
#     itself talks to nothing but 127.0.0.1;
#   - `opencode acp` exits when its stdin closes.
record_acp_opencode() {
  local pkg=$OPENCODE_PKG version=$OPENCODE_VERSION
  local npm_dir=$REPO/.cache/npm-opencode
  local agent_bin=$npm_dir/node_modules/.bin/opencode
  local plugin_dir=$REPO/.cache/npm-opencode-plugin
  local script_src out
  acp_agent_case opencode

  # 1. opencode, pinned, and the plugin package it would install.
  npm_pinned "$pkg" "$version" "$npm_dir" "$agent_bin"
  npm_pinned @opencode-ai/plugin "$version" "$plugin_dir" "$plugin_dir/node_modules/@opencode-ai/plugin"

  # 2. Temp HOME, XDG directories and workspace.
  local home ws
  acp_agent_dirs opencode
  local xdg=$home/xdg

  # 3. The model server, and opencode's config pointing at it.
  start_modelserver anthropic "$script_src" "$ws"
  opencode_config "$xdg" "$MS_URL" "$plugin_dir" \
    "$(jq 'if type == "object" then .opencodeConfig // {} else {} end' "$TMP/script.json")"

  # 4. Record through baton.
  local -a agent_env=(env -i)
  mapfile -t -O 2 agent_env < <(opencode_env "$home" "$xdg")
  acp_agent_record opencode "$home" "$ws" \
    "agent=$pkg" "agentVersion=$version" \
    "model=baton/scripted: baton-modelserver --api anthropic (scripted)" \
    "auth=none (a provider of its own config, with a made-up API key)" \
    -- "${agent_env[@]}" "$agent_bin" acp
}

# record_acp_qwen_code records @qwen-code/qwen-code as `qwen --acp`:
#   - its HOME is a temp directory (its sessions are under ~/.qwen, so every
#     baton invocation of one recording shares it: resume); the workspace is
#     a temp git repository;
#   - ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (made up) and ANTHROPIC_MODEL in
#     its environment select its auth type "anthropic" against the scripted
#     model server, with no authenticate call (qwen_code_env);
#   - ~/.qwen/settings.json switches off usage statistics (else it looks up
#     a telemetry host), managed auto-memory (else a memory sub-agent runs
#     after a turn, a request with tools that would eat a scripted reply)
#     and update checks (qwen_code_settings); the script's "qwenSettings" is
#     merged into it (tools.approvalMode of approval_accept and multi_turn);
#   - `qwen --acp` exits when its stdin closes.
record_acp_qwen_code() {
  local pkg=$QWEN_CODE_PKG version=$QWEN_CODE_VERSION
  local npm_dir=$REPO/.cache/npm-qwen-code
  local agent_bin=$npm_dir/node_modules/.bin/qwen
  local script_src out
  acp_agent_case qwen-code

  # 1. qwen-code, pinned.
  npm_pinned "$pkg" "$version" "$npm_dir" "$agent_bin"
  ACP_NODE_MODULES=$npm_dir/node_modules # redact_acp

  # 2. Temp HOME and workspace.
  local home ws
  acp_agent_dirs qwen-code

  # 3. The model server, and qwen's settings.
  start_modelserver anthropic "$script_src" "$ws"
  qwen_code_settings "$home" "$(jq 'if type == "object" then .qwenSettings // {} else {} end' "$TMP/script.json")"

  # 4. Record through baton.
  local -a agent_env=(env -i)
  mapfile -t -O 2 agent_env < <(qwen_code_env "$home" "$MS_URL")
  acp_agent_record qwen-code "$home" "$ws" \
    "agent=$pkg" "agentVersion=$version" \
    "model=$QWEN_CODE_MODEL on auth type anthropic: baton-modelserver --api anthropic (scripted)" \
    "auth=none (ANTHROPIC_API_KEY made up, in its environment)" \
    -- "${agent_env[@]}" "$agent_bin" --acp
}

# record_acp_gemini records @google/gemini-cli as `gemini --acp`:
#   - its HOME is a temp directory (its sessions are under ~/.gemini, so
#     every baton invocation of one recording shares it: resume); the
#     workspace is a temp git repository;
#   - GOOGLE_GEMINI_BASE_URL (the model server, --api gemini) and
#     GEMINI_API_KEY (made up) in its environment: its auth type "gateway",
#     no authenticate call (gemini_cli_env);
#   - ~/.gemini/settings.json switches off usage statistics, telemetry and
#     update checks (gemini_cli_settings); the script's "geminiSettings" is
#     merged into it;
#   - its model is "auto": each prompt first asks the router model
#     (generateContent with a JSON schema, a side call the server answers
#     without consuming the script), then streams the main turn;
#   - gemini-cli 0.61 names a session file by the minute it starts
#     (session-YYYY-MM-DDTHH-MM-ID8.jsonl), and session/load starts a fresh
#     recording of the loaded session before it reads it: in the same
#     minute that overwrites the saved conversation, and the load fails ("No
#     previous sessions found for this project."). So a later invocation of
#     the thread (resume) waits for the next minute (gemini_next_minute);
#   - `gemini --acp` exits when its stdin closes.
record_acp_gemini() {
  local pkg=$GEMINI_CLI_PKG version=$GEMINI_CLI_VERSION
  local npm_dir=$REPO/.cache/npm-gemini-cli
  local agent_bin=$npm_dir/node_modules/.bin/gemini
  local script_src out
  acp_agent_case gemini

  # 1. gemini-cli, pinned.
  npm_pinned "$pkg" "$version" "$npm_dir" "$agent_bin"
  ACP_NODE_MODULES=$npm_dir/node_modules # redact_acp

  # 2. Temp HOME and workspace.
  local home ws
  acp_agent_dirs gemini

  # 3. The model server, and gemini's settings.
  start_modelserver gemini "$script_src" "$ws"
  gemini_cli_settings "$home" "$(jq 'if type == "object" then .geminiSettings // {} else {} end' "$TMP/script.json")"

  # 4. Record through baton.
  BEFORE_RESUME=gemini_next_minute
  local -a agent_env=(env -i)
  mapfile -t -O 2 agent_env < <(gemini_cli_env "$home" "$MS_URL")
  acp_agent_record gemini "$home" "$ws" \
    "agent=$pkg" "agentVersion=$version" \
    "model=auto (router and main model): baton-modelserver --api gemini (scripted)" \
    "auth=none (auth type gateway: GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY made up)" \
    -- "${agent_env[@]}" "$agent_bin" --acp
}

# gemini_next_minute sleeps until the wall clock's minute changes (see
# record_acp_gemini).
gemini_next_minute() {
  local m
  m=$(date +%M)
  while [ "$(date +%M)" = "$m" ]; do sleep 1; done
}
