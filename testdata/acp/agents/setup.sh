# The offline setup of each ACP agent, shared by the recorder
# (testdata/acp/agents/record.sh, testdata/record.sh) and the live test of
# `baton run --agent` (testdata/live_agents.sh): the pinned package and
# version, the settings files written into the agent's temp HOME, and the
# environment that points it at the scripted model server on 127.0.0.1 and
# switches off whatever would go to the internet. Functions only; sourcing
# it does nothing else.

CLAUDE_CODE_ACP_PKG=@zed-industries/claude-code-acp
CLAUDE_CODE_ACP_VERSION=0.16.2
CODEX_ACP_PKG=@zed-industries/codex-acp
CODEX_ACP_VERSION=0.16.0
OPENCODE_PKG=opencode-ai
OPENCODE_VERSION=1.18.33 # as record_opencode
QWEN_CODE_PKG=@qwen-code/qwen-code
QWEN_CODE_VERSION=0.24.4
QWEN_CODE_MODEL=claude-sonnet-4-5
GEMINI_CLI_PKG=@google/gemini-cli
GEMINI_CLI_VERSION=0.61.0

# gemini_cli_settings HOME [EXTRA_JSON] writes HOME/.gemini/settings.json:
# no usage statistics, no telemetry, no auto-update or update notification
# (with them off, strace -f -e connect of a recording shows 127.0.0.1
# only); EXTRA_JSON (an object) is merged into it.
gemini_cli_settings() {
  local home=$1 extra=${2:-'{}'}
  mkdir -p "$home/.gemini"
  jq -n --argjson extra "$extra" '{
    privacy: {usageStatisticsEnabled: false},
    telemetry: {enabled: false},
    general: {enableAutoUpdate: false, enableAutoUpdateNotification: false}
  } * $extra' >"$home/.gemini/settings.json"
}

# gemini_cli_env HOME MS_URL prints gemini-cli's environment: the Gemini
# API at MS_URL (GOOGLE_GEMINI_BASE_URL: its auth type "gateway", no
# authenticate call) with a made-up key.
gemini_cli_env() {
  local home=$1 url=$2
  printf '%s\n' \
    "PATH=$PATH" \
    "HOME=$home" \
    "GOOGLE_GEMINI_BASE_URL=$url" \
    GEMINI_API_KEY=test-key-redacted \
    LANG=C.UTF-8 \
    TERM=dumb \
    NO_COLOR=1
}

# qwen_code_settings HOME [EXTRA_JSON] writes HOME/.qwen/settings.json: no
# usage statistics (a telemetry host lookup), no managed auto-memory (a
# memory sub-agent after each turn, a model request with tools that would
# consume a scripted reply), no update checks; EXTRA_JSON (an object) is
# merged into it.
qwen_code_settings() {
  local home=$1 extra=${2:-'{}'}
  mkdir -p "$home/.qwen"
  jq -n --argjson extra "$extra" '{
    privacy: {usageStatisticsEnabled: false},
    memory: {enableManagedAutoMemory: false},
    general: {enableAutoUpdate: false, disableAutoUpdate: true, disableUpdateNag: true}
  } * $extra' >"$home/.qwen/settings.json"
}

# qwen_code_env HOME MS_URL prints qwen-code's environment, one VAR=VALUE a
# line: its auth type anthropic against the model server at MS_URL.
qwen_code_env() {
  local home=$1 url=$2
  printf '%s\n' \
    "PATH=$PATH" \
    "HOME=$home" \
    "ANTHROPIC_BASE_URL=$url" \
    ANTHROPIC_API_KEY=sk-test-redacted \
    "ANTHROPIC_MODEL=$QWEN_CODE_MODEL" \
    LANG=C.UTF-8 \
    TERM=dumb \
    NO_COLOR=1
}

# claude_code_acp_env HOME MS_URL prints claude-code-acp's environment:
# ANTHROPIC_BASE_URL the model server, a made-up key, and telemetry, error
# reports, auto-update and the "fast mode" prefetch (which ignores
# ANTHROPIC_BASE_URL) off.
claude_code_acp_env() {
  local home=$1 url=$2
  printf '%s\n' \
    "PATH=$PATH" \
    "HOME=$home" \
    "ANTHROPIC_BASE_URL=$url" \
    ANTHROPIC_API_KEY=sk-test-redacted \
    DISABLE_TELEMETRY=1 \
    DISABLE_ERROR_REPORTING=1 \
    DISABLE_AUTOUPDATER=1 \
    DISABLE_BUG_COMMAND=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1 \
    CLAUDE_CODE_DISABLE_FAST_MODE=1
}

# codex_provider_toml MS_URL prints the end of a codex config.toml that
# codex and codex-acp recordings share: a model provider "baton" (the
# Responses API) whose base_url is the model server, no retries, and
# analytics, feedback, OTel and plugins off.
codex_provider_toml() {
  local url=$1
  cat <<TOML
[model_providers.baton]
name = "Baton scripted"
base_url = "$url/v1"
wire_api = "responses"
env_key = "BATON_FAKE_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
plugins = false
remote_plugin = false
TOML
}

# codex_acp_config CODEX_HOME MS_URL [EXTRA_TOML] writes CODEX_HOME/config.toml:
# model gpt-5.5 on a model provider "baton" (Responses API) whose base_url
# is the model server; update checks, web search, analytics, feedback,
# OTel and plugins off. EXTRA_TOML goes after the top-level keys.
codex_acp_config() {
  local codex_home=$1 url=$2 extra=${3:-}
  mkdir -p "$codex_home"
  cat >"$codex_home/config.toml" <<TOML
model = "gpt-5.5"
model_provider = "baton"
check_for_update_on_startup = false
web_search = "disabled"
$extra

$(codex_provider_toml "$url")
TOML
}

# codex_acp_env HOME CODEX_HOME prints codex-acp's environment: its key
# (made up), and a closed port on 127.0.0.1 as its HTTP(S) proxy.
codex_acp_env() {
  local home=$1 codex_home=$2
  printf '%s\n' \
    "PATH=$PATH" \
    "HOME=$home" \
    "CODEX_HOME=$codex_home" \
    BATON_FAKE_KEY=sk-test-redacted \
    LANG=C.UTF-8 \
    TERM=dumb \
    RUST_LOG=warn \
    HTTPS_PROXY=http://127.0.0.1:9 \
    HTTP_PROXY=http://127.0.0.1:9 \
    ALL_PROXY=http://127.0.0.1:9 \
    NO_PROXY=127.0.0.1,localhost
}

# opencode_config XDG MS_URL PLUGIN_DIR [EXTRA_JSON] writes
# XDG/config/opencode/opencode.json (a provider "baton" on
# @ai-sdk/anthropic whose base URL is the model server, model
# baton/scripted; sharing, auto-update, LSP and formatters off; EXTRA_JSON
# merged into it) and gives opencode the @opencode-ai/plugin install in
# PLUGIN_DIR (its package.json, package-lock.json and node_modules), so
# that it installs nothing from the registry on its start.
opencode_config() {
  local xdg=$1 url=$2 plugin_dir=$3 extra=${4:-'{}'}
  mkdir -p "$xdg"/{config,data,state,cache}/opencode
  jq -n --arg url "$url/v1" --argjson extra "$extra" '{
    "$schema": "https://opencode.ai/config.json",
    model: "baton/scripted", small_model: "baton/scripted",
    autoupdate: false, share: "disabled", lsp: false, formatter: false,
    provider: {baton: {npm: "@ai-sdk/anthropic", name: "Baton scripted",
      options: {baseURL: $url, apiKey: "sk-test-redacted"},
      models: {scripted: {name: "Scripted", tool_call: true, limit: {context: 200000, output: 8192}}}}}
  } * $extra' >"$xdg/config/opencode/opencode.json"
  cp "$plugin_dir/package.json" "$plugin_dir/package-lock.json" "$xdg/config/opencode/"
  ln -sfn "$plugin_dir/node_modules" "$xdg/config/opencode/node_modules"
}

# opencode_env HOME XDG prints opencode's environment: its XDG directories
# and every update, model-list, LSP download and share switch off.
opencode_env() {
  local home=$1 xdg=$2
  printf '%s\n' \
    "PATH=$PATH" \
    "HOME=$home" \
    "XDG_CONFIG_HOME=$xdg/config" \
    "XDG_DATA_HOME=$xdg/data" \
    "XDG_STATE_HOME=$xdg/state" \
    "XDG_CACHE_HOME=$xdg/cache" \
    LANG=C.UTF-8 \
    TERM=dumb \
    OPENCODE_DISABLE_AUTOUPDATE=1 \
    OPENCODE_DISABLE_MODELS_FETCH=1 \
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 \
    OPENCODE_DISABLE_SHARE=1
}
