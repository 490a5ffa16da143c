# record_opencode records `opencode serve` (pinned opencode-ai) through
# bin/baton-plugin-opencode. Sourced by testdata/record.sh.
#
#   - opencode's HOME and XDG_* directories are a temp directory (its
#     session store is $XDG_DATA_HOME/opencode/opencode.db: a resumed
#     session needs the same directories, so every baton invocation of one
#     recording shares them); the workspace is a temp git repository;
#   - $XDG_CONFIG_HOME/opencode/opencode.json points opencode at the
#     scripted model server (a provider "baton" on @ai-sdk/anthropic, whose
#     base URL is the model server) with model baton/scripted, and switches
#     off sharing, auto-update, LSP and formatters; the plugin adds the
#     permission policy itself (OPENCODE_CONFIG_CONTENT);
#   - the plugin appends `serve --hostname 127.0.0.1 --port N`; replaypeer
#     record --http-proxy runs opencode on another free port, prints its own
#     address as opencode does, and records what passes (the invocation with
#     the port as "<any>").
#   - a scenario with scenarios/SCENARIO.config.json has it merged into
#     opencode.json (mcp_usage: the model's prices, so that opencode states
#     a cost); its MCP servers (SCENARIO.mcp) are added with baton mcp add
#     as for every provider (record.sh).
# opencode installs its plugin package (@opencode-ai/plugin) into
# $XDG_CONFIG_HOME/opencode on its first start, from the npm registry.
record_opencode() {
  local oc_pkg=opencode-ai
  local oc_version=1.18.33
  local protocol='opencode-server/1 http+sse'
  local npm_dir=$REPO/.cache/npm-opencode
  local oc_bin=$npm_dir/node_modules/.bin/opencode
  local script_src=$REPO/testdata/opencode/scenarios/$SCENARIO.json
  local out=${RECORD_OUT:-$REPO/testdata/opencode/$SCENARIO.ndjson}

  [ -f "$script_src" ] || die "no model script $script_src"
  need_tools

  # 1. opencode, pinned.
  npm_pinned "$oc_pkg" "$oc_version" "$npm_dir" "$oc_bin"

  # 2. Temp HOME, XDG directories and workspace.
  TMP=$(mktemp -d)
  local home=$TMP/home ws=${SHARED_WS:-$TMP/ws} xdg=$TMP/home/xdg
  mkdir -p "$home" "$xdg"/{config,data,state,cache}/opencode
  init_workspace "$ws"

  # 3. The model server, and opencode's config pointing at it.
  start_modelserver anthropic "$script_src" "$ws"
  jq -n --arg url "$MS_URL/v1" '{
    "$schema": "https://opencode.ai/config.json",
    model: "baton/scripted", small_model: "baton/scripted",
    autoupdate: false, share: "disabled", lsp: false, formatter: false,
    provider: {baton: {npm: "@ai-sdk/anthropic", name: "Baton scripted",
      options: {baseURL: $url, apiKey: "sk-test-redacted"},
      models: {scripted: {name: "Scripted", tool_call: true, limit: {context: 200000, output: 8192}}}}}
  }' >"$xdg/config/opencode/opencode.json"
  local overlay=$REPO/testdata/opencode/scenarios/$SCENARIO.config.json
  if [ -f "$overlay" ]; then
    jq -s '.[0] * .[1]' "$xdg/config/opencode/opencode.json" "$overlay" >"$TMP/opencode.json"
    mv "$TMP/opencode.json" "$xdg/config/opencode/opencode.json"
  fi

  # 4. Record through baton.
  read_client_side "$REPO/testdata/opencode"
  # opencode runs with only this environment, and the permission policy the
  # plugin sets (OPENCODE_CONFIG_CONTENT, through replaypeer's environment).
  local -a oc_env=(
    "PATH=$PATH"
    "HOME=$home"
    "XDG_CONFIG_HOME=$xdg/config"
    "XDG_DATA_HOME=$xdg/data"
    "XDG_STATE_HOME=$xdg/state"
    "XDG_CACHE_HOME=$xdg/cache"
    LANG=C.UTF-8
    TERM=dumb
    OPENCODE_DISABLE_AUTOUPDATE=1
    OPENCODE_DISABLE_MODELS_FETCH=1
    OPENCODE_DISABLE_LSP_DOWNLOAD=1
    OPENCODE_DISABLE_SHARE=1
  )
  local envs= kv
  for kv in "${oc_env[@]}"; do envs+=" $(quote "$kv")"; done
  local -a argv=(
    env "HOME=$home"
    "$BIN/replaypeer" record --append --http-proxy
    --out "$TMP/transcript.ndjson"
    --provider opencode
    --protocol "$protocol"
    --scenario "$SCENARIO"
    --workspace "$ws"
    --meta "agent=$oc_pkg"
    --meta "agentVersion=$oc_version"
    --meta "model=baton/scripted: baton-modelserver --api anthropic (scripted)"
    --meta "modelScript=testdata/opencode/scenarios/$SCENARIO.json"
    --meta "capturedBy=make record"
    --
    sh -c "exec env -i$envs \"OPENCODE_CONFIG_CONTENT=\$OPENCODE_CONFIG_CONTENT\" $(quote "$oc_bin") \"\$@\"" sh
    --
  )
  local cmd= w
  for w in "${argv[@]}"; do cmd+="${cmd:+ }$(quote "$w")"; done
  WS_TMP=
  record_and_verify opencode "$ws" "$cmd" "$out"
}
