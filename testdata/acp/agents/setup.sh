# The offline setup of each ACP agent, shared by the recorder
# (testdata/acp/agents/record.sh, testdata/record.sh) and the live test of
# `baton run --agent` (testdata/live_agents.sh): the pinned package and
# version, the settings files written into the agent's temp HOME, and the
# environment that points it at the scripted model server on 127.0.0.1 and
# switches off whatever would go to the internet. Functions only; sourcing
# it does nothing else.

QWEN_CODE_PKG=@qwen-code/qwen-code
QWEN_CODE_VERSION=0.24.4
QWEN_CODE_MODEL=claude-sonnet-4-5

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
