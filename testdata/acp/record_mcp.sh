#!/usr/bin/env bash
# record_mcp.sh — record testdata/acp/mcp_tools.ndjson from the real agent
# (claude-code-acp, pinned as in testdata/record.sh) with the host's MCP
# servers in session/new: `baton run` cannot configure MCP servers yet, so
# the plugin's own TestRecordMCP (plugins/acp/record_test.go) drives the
# session through the real plugin binary, with `replaypeer record` around
# the agent as the provider command.
#
# As in record.sh: a temp HOME and git workspace, the scripted Anthropic
# model server on 127.0.0.1 (testdata/acp/scenarios/mcp_tools.json), the
# agent's env offline. The stdio MCP server is host/internal/testbin/mcptool,
# on the agent's PATH as "mcptool"; the http one is at 127.0.0.1:9, where
# nothing listens. The script checks that the tool call reached mcptool
# (its evidence file) and that every scripted reply was used.
#
# Env: KEEP_TMP=1 keeps the temp directory.
set -euo pipefail

die() { echo "record_mcp.sh: $*" >&2; exit 1; }

REPO=$(cd "$(dirname "$0")/../.." && pwd)
SCENARIO=mcp_tools
OUT=$REPO/testdata/acp/$SCENARIO.ndjson
AGENT_PKG=@zed-industries/claude-code-acp
AGENT_VERSION=0.16.2
NPM_DIR=$REPO/.cache/npm-acp
AGENT_BIN=$NPM_DIR/node_modules/.bin/claude-code-acp

for t in node npm git jq go; do command -v "$t" >/dev/null || die "$t is not installed"; done

TMP=$(mktemp -d)
cleanup() {
  [ -n "${MS_PID:-}" ] && kill "$MS_PID" 2>/dev/null || true
  [ "${KEEP_TMP:-}" = 1 ] || rm -rf "$TMP"
}
trap cleanup EXIT

# The agent, pinned.
have=
[ -f "$NPM_DIR/node_modules/$AGENT_PKG/package.json" ] && have=$(jq -r .version "$NPM_DIR/node_modules/$AGENT_PKG/package.json")
if [ "$have" != "$AGENT_VERSION" ]; then
  mkdir -p "$NPM_DIR"
  [ -f "$NPM_DIR/package.json" ] || echo '{"private":true}' >"$NPM_DIR/package.json"
  npm install --prefix "$NPM_DIR" --no-audit --no-fund --save-exact "$AGENT_PKG@$AGENT_VERSION" >&2
fi

# The programs.
mkdir -p "$TMP/bin"
(cd "$REPO/replaypeer" && go build -o "$TMP/bin/replaypeer" .)
(cd "$REPO/host" && go build -o "$TMP/bin/baton-modelserver" ./cmd/baton-modelserver)
(cd "$REPO/host" && go build -o "$TMP/bin/mcptool" ./internal/testbin/mcptool)

# Temp HOME and workspace (a git repository with one commit).
home=$TMP/home ws=$TMP/ws
mkdir -p "$home" "$ws"
git init -q "$ws"
printf '# Replay workspace\n\nA throwaway repository for recording transcripts.\n' >"$ws/README.md"
git -C "$ws" add README.md
GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \
  git -C "$ws" -c user.name=recorder -c user.email=recorder@example.invalid -c commit.gpgsign=false commit -q -m "Initial commit"

# The model server on 127.0.0.1.
sed "s|{{CWD}}|$ws|g" "$REPO/testdata/acp/scenarios/$SCENARIO.json" >"$TMP/script.json"
REPLIES=$(jq '.replies | length' "$TMP/script.json")
"$TMP/bin/baton-modelserver" --api anthropic --script "$TMP/script.json" --addr 127.0.0.1:0 \
  --log "$TMP/model-requests.jsonl" >"$TMP/modelserver.out" 2>"$TMP/modelserver.err" &
MS_PID=$!
MS_URL=
for _ in $(seq 100); do
  MS_URL=$(sed -n '1s/^listening on //p' "$TMP/modelserver.out")
  [ -n "$MS_URL" ] && break
  sleep 0.1
done
case $MS_URL in http://127.0.0.1:*) ;; *) die "model server address: '$MS_URL'" ;; esac

# The provider command: replaypeer record around the agent (see record.sh
# for the env and the stdin wrapper).
wrapper='const c = require("child_process").spawn(process.argv[1], process.argv.slice(2), {stdio: ["pipe", "inherit", "inherit"]});
process.stdin.pipe(c.stdin);
process.stdin.on("end", () => setTimeout(() => c.kill("SIGTERM"), 1500));
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => c.kill(s));
c.on("exit", (code, sig) => process.exit(code === null ? (sig === "SIGTERM" ? 0 : 1) : code));'
sdk_json=$NPM_DIR/node_modules/@anthropic-ai/claude-agent-sdk/package.json
argv=$(jq -cn --args '$ARGS.positional' -- \
  env "HOME=$home" "$TMP/bin/replaypeer" record --append --out "$TMP/transcript.ndjson" \
  --provider acp --protocol acp/1 --meta "transport=json-rpc ndjson stdio" --scenario "$SCENARIO" --workspace "$ws" \
  --meta "agent=$AGENT_PKG" --meta "agentVersion=$AGENT_VERSION" \
  --meta "claudeAgentSdkVersion=$(jq -r .version "$sdk_json")" --meta "claudeCodeVersion=$(jq -r '.claudeCodeVersion // "unknown"' "$sdk_json")" \
  --meta "model=baton-modelserver (scripted)" --meta "modelScript=testdata/acp/scenarios/$SCENARIO.json" \
  --meta "auth=ANTHROPIC_API_KEY (made up)" --meta "capturedBy=testdata/acp/record_mcp.sh" \
  --meta "mcpServers=baton (stdio: host/internal/testbin/mcptool), docs (http: 127.0.0.1:9, nothing listens)" \
  --meta "agentStop=SIGTERM 1.5 s after its stdin closes (node wrapper, as in testdata/record.sh)" \
  -- env -i "PATH=$TMP/bin:$PATH" "HOME=$home" "ANTHROPIC_BASE_URL=$MS_URL" ANTHROPIC_API_KEY=sk-test-redacted \
  DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 DISABLE_BUG_COMMAND=1 \
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1 CLAUDE_CODE_DISABLE_FAST_MODE=1 \
  node -e "$wrapper" "$AGENT_BIN")

echo "record_mcp.sh: recording (model server $MS_URL, tmp $TMP)" >&2
(cd "$REPO/plugins/acp" && BATON_ACP_RECORD_ARGV=$argv BATON_ACP_RECORD_WS=$ws \
  go test -count=1 -run '^TestRecordMCP$' -v . >"$TMP/test.out" 2>&1) || { KEEP_TMP=1; cat "$TMP/test.out" >&2; die "recording failed (kept $TMP)"; }

kill "$MS_PID"; wait "$MS_PID" 2>/dev/null || true; MS_PID=
consumed=$(sed -n 's/.*stopped; \([0-9]*\) script replies consumed.*/\1/p' "$TMP/modelserver.err")
[ "$consumed" = "$REPLIES" ] || { KEEP_TMP=1; die "the agent used ${consumed:-?} of $REPLIES scripted replies (kept $TMP)"; }
grep -q 'hello from the model' "$ws/mcp-evidence.txt" 2>/dev/null || { KEEP_TMP=1; die "the tool call never reached mcptool (kept $TMP)"; }

t=$TMP/transcript.ndjson
jq -e -s '.[0].type == "transcript_start" and .[0].metadata.source == "recorded" and .[-1].type == "runtime_exit"' "$t" >/dev/null ||
  { KEEP_TMP=1; die "not a whole recorded transcript (kept $TMP)"; }
if grep -q -e "$TMP" "$t"; then KEEP_TMP=1; die "the transcript still holds a temp path (kept $TMP)"; fi
jq -c 'if .type == "expect_outbound" and .frame.method == "initialize"
       then .frame.params.clientInfo.version = "<any>" else . end' "$t" >"$OUT"
echo "record_mcp.sh: wrote ${OUT#"$REPO"/} ($(wc -l <"$OUT") lines)" >&2
