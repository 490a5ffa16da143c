# shellcheck shell=bash
# run_baton_restart plays the client side of a scenario whose name ends in
# _restart (`make record PROVIDER=codex SCENARIO=usage_limit_restart`):
# sourced by testdata/record.sh, it stands in for run_baton, for the
# recording and for the replay that checks it alike. The host is killed
# while a run waits for a provider's limit to lift, and started again after
# the wait's instant:
#
#   1. `baton serve --data DATA` runs in the background (a service arms
#      every thread's waits, and those a restart left);
#   2. `baton run` (in the background: it follows the loop, and loses its
#      service in step 3) creates the thread with
#      testdata/PROVIDER/SCENARIO.flags (--on-limit wait ...) and sends the
#      scenario's one message; its first model call gets a 429 usage limit;
#   3. once `baton show --json` has the thread's armed wait, the service is
#      killed with SIGKILL; its plugins get SIGTERM from the kernel (their
#      parent died) and stop their providers, so the recorder ends the
#      first provider process's part of the transcript;
#   4. after the wait's instant, `baton serve` starts again: it recovers the
#      thread (the first session ended: the host restarted), fires the wait
#      at once, and the continuation runs in a new provider process that
#      resumes the provider's thread (the recorder appends it);
#   5. once the run has ended, the service is stopped with SIGTERM (it
#      closes the session: the transcript's last runtime_exit), and
#      `baton show` of the thread is the output. Status 0 when the run
#      completed after exactly one continuation.
#
# When recording, the limit's reset is the model server's (a few seconds
# ahead); when replaying, the recorded reset has passed, so the wait is
# the first probe's (--probe-interval in the flags), again a few seconds.
run_baton_restart() {
  local provider=$1 data=$2 ws=$3 cmd=$4 out=$5 err=$6 thread= at= i
  local -a flags=()
  if [ -f "$REPO/testdata/$provider/$SCENARIO.flags" ]; then
    eval "flags=($(<"$REPO/testdata/$provider/$SCENARIO.flags"))"
  fi
  [ ${#msgs[@]} -eq 1 ] || { echo "record.sh: a restart scenario sends one message, not ${#msgs[@]}" >&2; return 1; }
  : >"$out"
  mkdir -p "$data"

  serve_start "$data" "$err" || return 1
  "$BIN/baton" run --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" --cwd "$ws" --provider "$provider" \
    --provider-command "$cmd" "${flags[@]}" "${msgs[0]}" >"$TMP/run.out" 2>>"$err" </dev/null &
  RUN_PID=$!

  # 2-3. The thread waits: kill the service.
  for i in $(seq 600); do
    [ -n "$thread" ] || thread=$(sed -n 's/^● thread \(thr_[0-9a-z]*\) .*/\1/p' "$TMP/run.out" | head -n 1)
    if [ -n "$thread" ]; then
      at=$("$BIN/baton" show --data "$data" --json "$thread" 2>>"$err" | jq -r '.loop.wait.at // empty' || true)
      [ -n "$at" ] && break
    fi
    kill -0 "$RUN_PID" 2>/dev/null || { echo "record.sh: baton run ended before the run waited" >&2; cat "$TMP/run.out" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$at" ] || { echo "record.sh: the run did not wait for the limit" >&2; return 1; }
  local -a plugins
  mapfile -t plugins < <(pgrep -P "$SERVE_PID")
  echo "record.sh: thread $thread waits until $at; killing the service (pid $SERVE_PID, plugins ${plugins[*]}) with SIGKILL" >&2
  kill -KILL "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
  SERVE_PID=
  wait "$RUN_PID" 2>/dev/null || true # it lost its service
  RUN_PID=
  cat "$TMP/run.out" >>"$out"
  # The plugins stop their providers and exit (the recorder finishes the
  # first process's part of the transcript) before the next host starts.
  for i in $(seq 300); do
    local left=0 p
    for p in "${plugins[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  [ $left -eq 0 ] || { echo "record.sh: the killed service's plugins (${plugins[*]}) did not exit" >&2; return 1; }

  # 4. Start again after the wait's instant.
  local until now
  until=$(date -d "$at" +%s.%N)
  now=$(date +%s.%N)
  sleep "$(awk -v u="$until" -v n="$now" 'BEGIN { d = u - n + 1; print (d > 0 ? d : 0) }')"
  echo "record.sh: the wait's instant has passed; starting the service again" >&2
  serve_start "$data" "$err" || return 1
  local status=
  for i in $(seq 1200); do
    status=$("$BIN/baton" show --data "$data" --json "$thread" 2>>"$err" |
      jq -r 'if (.runs[0].status | IN("completed", "failed", "blocked", "interrupted")) and (.loop.wait == null) then .runs[0].status else empty end' || true)
    [ -n "$status" ] && break
    sleep 0.1
  done

  # 5. Stop the service (it closes the session) and show the thread.
  serve_stop
  "$BIN/baton" show --data "$data" "$thread" >>"$out" 2>>"$err" || return 1
  [ "$status" = completed ] || { echo "record.sh: run 1 ended ${status:-(not in time)}" >&2; return 1; }
  local attempts
  attempts=$("$BIN/baton" show --data "$data" --json "$thread" 2>>"$err" | jq -c '[.runs[0].attempts[].reason]')
  [ "$attempts" = '["initial","usage_limit_continuation"]' ] ||
    { echo "record.sh: run 1's attempts are $attempts, want one continuation" >&2; return 1; }
}

# serve_start DATA ERR starts `baton serve` on DATA in the background
# (SERVE_PID) and waits for its socket to answer.
serve_start() {
  local data=$1 err=$2 i
  "$BIN/baton" serve --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" >>"$err" 2>&1 </dev/null &
  SERVE_PID=$!
  for i in $(seq 300); do
    "$BIN/baton" threads --data "$data" --server "unix://$data/baton.sock" >/dev/null 2>&1 && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "record.sh: baton serve exited" >&2; return 1; }
    sleep 0.1
  done
  echo "record.sh: baton serve did not answer on $data/baton.sock" >&2
  return 1
}

# serve_stop stops the service with SIGTERM (it drains) and waits for it.
serve_stop() {
  [ -n "$SERVE_PID" ] || return 0
  kill -TERM "$SERVE_PID" 2>/dev/null || true
  wait "$SERVE_PID" 2>/dev/null || true
  SERVE_PID=
}
