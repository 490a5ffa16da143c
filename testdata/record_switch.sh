# shellcheck shell=bash
# record_switch records a thread that moves between two real agents:
# `make record PROVIDER=FIRST+SECOND SCENARIO=provider_switch_return` (or
# SCENARIO=provider_switch_rollback or provider_switch_rollback_away),
# sourced by testdata/record.sh, whose helpers it uses. The pairs the tests
# replay are codex+claude and acp+opencode; `make record-switch` records
# every pair and scenario (about 3 minutes).
#
#   1. Each provider is set up by its own record_P (pinned install, temp
#      HOME, its scripted model server on 127.0.0.1 with
#      testdata/P/scenarios/SCENARIO.json, its config), but all of them on
#      one shared workspace (the thread's cwd), and without playing the
#      client: record_and_verify is replaced by one that keeps the provider
#      command (`replaypeer record --append ... -- <real agent>`). Each
#      provider has its own model server (its own API flavour and script)
#      and its own transcript file, appended to by every process the host
#      starts for it.
#   2. The client side is the scenario's test (TestProviderSwitchReturn,
#      TestProviderSwitchRollback or TestProviderSwitchRollbackAway),
#      subtest FIRST_SECOND, in
#      host/internal/orchestrator, run with $BATON_SWITCH_RECORD naming a
#      file with the scenario, the workspace and the two commands. Return:
#      run 1 on FIRST, a switch to SECOND, run 2, a switch back, run 3
#      (FIRST resumes its own conversation with a delta handoff). Rollback:
#      the same three runs, a rollback to run 1 on FIRST, a switch to
#      SECOND and run 4 (its conversation saw a dropped run: a fresh one,
#      with a full summary). Rollback away: run 1 on FIRST, run 2 on
#      SECOND, a rollback to run 1 there (SECOND reconciles its own
#      conversation), a switch back and run 3 (FIRST resumes with no
#      handoff: it has seen all that is left). Usage limit switch return
#      (codex+claude, TestUsageLimitSwitchReturn): run 1 on FIRST hits a
#      usage limit (its model server's 429), the policy switch:SECOND,return
#      goes on on SECOND, the host's clock is set past the reset, the thread
#      returns and run 2 is FIRST's again, with a delta handoff. The test drives the real
#      host and plugins, as it does when it replays, with the same seeded
#      ids, so the handoff text a replay sends is byte for byte the
#      recorded one. A change to the handoff text means recording again.
#   3. Every scripted reply of both model servers must be consumed; each
#      transcript gets the usual checks and rewrites (record_and_verify's),
#      then goes to testdata/P/SCENARIO.ndjson.
#   4. Transcripts derived from the recorded ones by a script (header
#      "source":"authored") are written again: for codex's return,
#      provider_switch_return_resume_fails.ndjson (codex no longer has its
#      thread on the return; see derive_resume_fails).
#   5. The test is run again, now replaying the new transcripts.
#
# Env: KEEP_TMP=1 keeps the temp directories; GO names the go command.
# RECORD_OUT is not used: the transcripts always go to testdata.
record_switch() {
  local first=${PROVIDER%%+*} second=${PROVIDER#*+} p
  case $second in '' | *+*) die "PROVIDER must be FIRST+SECOND, got '$PROVIDER'" ;; esac
  [ "$first" != "$second" ] || die "a switch needs two providers, got '$PROVIDER'"
  local test
  case $SCENARIO in
    provider_switch_return) test=TestProviderSwitchReturn ;;
    provider_switch_rollback) test=TestProviderSwitchRollback ;;
    provider_switch_rollback_away) test=TestProviderSwitchRollbackAway ;;
    usage_limit_switch_return) test=TestUsageLimitSwitchReturn ;;
    *) die "a switch recording plays provider_switch_return, provider_switch_rollback, provider_switch_rollback_away or usage_limit_switch_return, not $SCENARIO" ;;
  esac
  command -v "${GO:-go}" >/dev/null || die "${GO:-go} is not installed"
  SWITCH=1
  SW_DIRS+=("$(mktemp -d)")
  SHARED_WS=${SW_DIRS[-1]}/ws
  init_workspace "$SHARED_WS"

  # 1. Each provider's setup, keeping its command.
  local -A sw_argv=() sw_transcript=() sw_replies=() sw_mserr=() sw_out=()
  record_and_verify() {
    local provider=$1
    local w js=
    for w in "${argv[@]}"; do js+=${js:+,}$(jq -cn --arg w "$w" '$w'); done
    sw_argv[$provider]="[$js]"
    sw_transcript[$provider]=$TMP/transcript.ndjson
    sw_replies[$provider]=$REPLIES
    sw_mserr[$provider]=$TMP/modelserver.err
    sw_out[$provider]=$4
    SW_MS_PIDS+=("$MS_PID")
    SW_DIRS+=("$TMP")
    [ -n "$WS_TMP" ] && SW_DIRS+=("$WS_TMP")
    MS_PID= TMP= WS_TMP=
  }
  for p in "$first" "$second"; do
    load_provider "$p"
    "record_$p"
  done
  local dir=${SW_DIRS[0]}
  jq -n --arg pair "${first}_$second" --arg ws "$SHARED_WS" --arg scenario "$SCENARIO" \
    --argjson a "${sw_argv[$first]}" --argjson b "${sw_argv[$second]}" --arg pa "$first" --arg pb "$second" \
    '{scenario: $scenario, pair: $pair, workspace: $ws, commands: {($pa): $a, ($pb): $b}}' >"$dir/switch.json"

  # 2. The client: the Go test, recording.
  echo "record.sh: recording $first -> $second -> $first ($SCENARIO, tmp $dir)" >&2
  local start=$SECONDS
  if ! switch_test "$test" "$first" "$second" BATON_SWITCH_RECORD="$dir/switch.json" >"$dir/record.log" 2>&1; then
    KEEP_TMP=1
    cat "$dir/record.log" >&2
    die "the recording test failed; nothing written (logs kept in $dir and the providers' temp dirs)"
  fi
  echo "record.sh: recording took $((SECONDS - start))s" >&2

  # 3. Checks and rewrites, per provider.
  stop_modelserver
  local consumed t ws=$SHARED_WS
  for p in "$first" "$second"; do
    consumed=$(sed -n 's/.*stopped; \([0-9]*\) script replies consumed.*/\1/p' "${sw_mserr[$p]}")
    if [ "$consumed" != "${sw_replies[$p]}" ]; then
      KEEP_TMP=1
      cat "${sw_mserr[$p]}" >&2
      die "$p consumed ${consumed:-?} of ${sw_replies[$p]} scripted model replies (logs kept)"
    fi
    t=${sw_transcript[$p]}
    [ -s "$t" ] || { KEEP_TMP=1; die "replaypeer wrote no $p transcript (logs kept)"; }
    jq -e -s '.[0].type == "transcript_start" and .[0].metadata.source == "recorded"' "$t" >/dev/null ||
      { KEEP_TMP=1; die "the $p transcript's header is not a recorded transcript_start"; }
    jq -e -s '.[-1].type == "runtime_exit"' "$t" >/dev/null ||
      { KEEP_TMP=1; die "the $p transcript does not end with runtime_exit"; }
    local -a paths=(-e "$SHARED_WS" -e "$REPO/.cache")
    local d
    for d in "${SW_DIRS[@]}"; do paths+=(-e "$d"); done
    if grep -q "${paths[@]}" "$t"; then
      KEEP_TMP=1
      die "the $p transcript still contains a temp path (kept in $t)"
    fi
    jq -c --arg pair "$first -> $second -> $first" --arg driver "$test (host/internal/orchestrator)" \
      'if .type == "transcript_start" then .metadata.switch = $pair | .metadata.driver = $driver
       elif .type == "expect_outbound" and .frame.method == "initialize" then .frame.params.clientInfo.version = "<any>"
       else . end' "$t" >"$t.tmp" && mv "$t.tmp" "$t"
    if declare -F "postprocess_$p" >/dev/null; then
      "postprocess_$p" "$t"
    fi
    cp "$t" "${sw_out[$p]}"
    echo "record.sh: wrote ${sw_out[$p]#"$REPO"/} ($(wc -l <"${sw_out[$p]}") lines)" >&2
  done

  # 4. Derived transcripts.
  if [ "$first" = codex ] && [ "$SCENARIO" = provider_switch_return ]; then
    derive_resume_fails "${sw_out[codex]}" "$REPO/testdata/codex/provider_switch_return_resume_fails.ndjson"
  fi

  # 5. Replay.
  if ! switch_test "$test" "$first" "$second" >"$dir/replay.log" 2>&1; then
    KEEP_TMP=1
    cat "$dir/replay.log" >&2
    die "replaying the new transcripts failed (logs kept in $dir)"
  fi
  echo "record.sh: replay OK" >&2
}

# switch_test TEST FIRST SECOND [VAR=VALUE...] runs TEST for the pair with
# the binaries of bin/.
switch_test() {
  local test=$1 first=$2 second=$3
  shift 3
  (cd "$REPO/host" && env GOWORK=off BATON_BIN="$BIN" BATON_REPLAYPEER="$BIN/replaypeer" "$@" \
    "${GO:-go}" test -count=1 -v -run "^$test\$/^${first}_$second\$" ./internal/orchestrator/)
}

# derive_resume_fails IN OUT writes a codex transcript in which the return
# cannot resume codex's thread: the second process answers thread/resume
# with the error codex gives for a thread it has no rollout of, and the
# plugin starts a fresh thread (thread/start), whose id replaces the old
# one in the rest of the transcript. The turn's prompt (the fallback's full
# summary) matches any text: the test checks it in the raw frames.
derive_resume_fails() {
  local in=$1 out=$2
  jq -c -s '
    . as $all
    | (map(.type == "runtime_exit") | index(true)) as $exit
    | ([range($exit + 1; length)] | map(select($all[.].type == "expect_outbound" and $all[.].frame.method == "thread/resume")) | first) as $rs
    | $all[$rs].frame as $req
    | ($req.params.threadId) as $old
    | ($old[:-6] + "f7e5h0") as $new
    | ([range($rs + 1; length)] | map(select($all[.].type == "emit_inbound" and $all[.].frame.id == $req.id and ($all[.].frame | has("method") | not))) | first) as $resp
    | def shift: if (.frame.id | type) == "number" and .frame.id >= $req.id + 1
                   and ((.type == "expect_outbound" and (.frame | has("method"))) or (.type == "emit_inbound" and (.frame | has("method") | not)))
                 then .frame.id += 1 else . end;
      def renamed: walk(if type == "string" and . == $old then $new else . end);
    [ $all[:$rs + 1][],
      {type: "emit_inbound", label: "resume failed (authored)",
       frame: {id: $req.id, error: {code: -32600, message: ("no rollout found for thread id " + $old)}}},
      {type: "expect_outbound", label: "thread/start (authored: a fresh thread)",
       frame: {id: ($req.id + 1), jsonrpc: "2.0", method: "thread/start", params: "<any>"}},
      ($all[$resp] | .frame.id = ($req.id + 1) | .label = "thread/start response (authored from the resume response)" | renamed),
      ($all[$rs + 1:][] | select(. != $all[$resp])
       | shift | renamed
       | if .type == "expect_outbound" and .frame.method == "turn/start" then .frame.params.input = "<any>" else . end)
    ]
    | .[0].metadata.source = "authored"
    | .[0].scenario = "provider_switch_return_resume_fails"
    | .[0].metadata.authoredFrom = "testdata/codex/provider_switch_return.ndjson (recorded), by derive_resume_fails in testdata/record_switch.sh: the return'"'"'s thread/resume fails (codex has no rollout of the thread), the plugin starts a fresh thread (the resume response, renamed), and its prompt (the full summary) matches any text"
    | .[]' "$in" >"$out"
  echo "record.sh: wrote ${out#"$REPO"/} (authored from ${in#"$REPO"/})" >&2
}
