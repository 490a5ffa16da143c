# shellcheck shell=bash
# live_worktrees runs real agents in parallel, each on a worktree of its own
# of one repository, and merges what each wrote: `record.sh codex,claude
# worktree_parallel`, part of `make live-test`. Sourced by testdata/record.sh,
# whose helpers it uses. It records nothing: the run is the test.
#
#   1. A temp git repository stands for the user's: a commit on its first
#      branch (the base), then the user's own work on another branch (wip),
#      checked out, with a change not committed and a file not tracked.
#   2. Each provider is set up by its own record_P (pinned install, temp
#      HOME, its scripted model server on 127.0.0.1 with
#      testdata/P/scenarios/SCENARIO.json, its config), without playing the
#      client: record_and_verify is replaced by one that keeps the agent's
#      command (what follows replaypeer record's "--"). Each becomes a
#      small program named as the provider's usual command (codex, claude)
#      in a directory put first on PATH, as a user's install would be.
#   3. `baton run --worktree --base BASE --provider codex,claude --approve
#      accept TASK` runs one thread per provider, in parallel, each on a
#      new worktree and branch, in the host baton run embeds (with
#      LIVE_SERVE=1: in `baton serve`, started first, which every verb
#      below then speaks to). Every run must complete, both at once, and
#      every scripted reply be consumed.
#   4. Each thread's branch has one commit on the base, adding only
#      P.txt (the file its agent wrote), with the thread's trailers.
#   5. `baton merge THREAD` brings each branch into the base branch (the
#      branch the base came from, checked out nowhere): the first fast-
#      forwards, the second makes a merge commit; the base branch's tree
#      then holds both files.
#   6. The user's worktree is byte for byte as it was (its files, index
#      and HEAD, and git status), from before the threads until after the
#      merges.
#
# Env: KEEP_TMP=1 keeps the temp directories (the data dir with the
# worktrees, the agents' HOMEs, the logs); BATON_LOG_LEVEL sets baton's.
# RECORD_OUT is not used: nothing is recorded. LIVE_SERVE=1 runs the
# threads in `baton serve` (stopped with SIGTERM at the end: it must exit
# 0).
live_worktrees() {
  local -a names
  IFS=, read -r -a names <<<"$PROVIDER"
  [ ${#names[@]} -eq 2 ] || die "a parallel run takes two providers (FIRST,SECOND), got '$PROVIDER'"
  SWITCH=1 # the client is this script: record_P plays no messages
  SW_DIRS+=("$(mktemp -d)")
  local dir=${SW_DIRS[-1]}
  SHARED_WS=$dir/repo
  local ws=$SHARED_WS data=$dir/data shims=$dir/bin

  # 1. The user's repository.
  init_workspace "$ws"
  local base
  base=$(git -C "$ws" symbolic-ref --short HEAD)
  git -C "$ws" switch -q -c wip
  printf '\nThe user is editing this line.\n' >>"$ws/README.md"
  printf 'not tracked\n' >"$ws/notes.txt"

  # 2. Each agent, set up and put on PATH under its usual name.
  mkdir -p "$shims"
  local -A replies=() mserr=()
  record_and_verify() {
    local provider=$1
    live_shim "$provider" "$shims/$(live_usual_name "$provider")" "${argv[@]}"
    replies[$provider]=$REPLIES
    mserr[$provider]=$TMP/modelserver.err
    SW_MS_PIDS+=("$MS_PID")
    SW_DIRS+=("$TMP")
    [ -n "$WS_TMP" ] && SW_DIRS+=("$WS_TMP")
    MS_PID= TMP= WS_TMP=
  }
  local p
  for p in "${names[@]}"; do
    load_provider "$p"
    "record_$p"
  done
  local before
  before=$(user_worktree "$ws")

  # 3. The threads, in parallel.
  local task="Write a file named after yourself (NAME.txt) saying who made it."
  for p in "${names[@]}"; do
    echo "record.sh: live: $p is $("$shims/$(live_usual_name "$p")" --version | head -n 1)" >&2
  done
  echo "record.sh: live: running ${names[*]} in parallel on worktrees of one repository (tmp $dir)" >&2
  if [ -n "${LIVE_SERVE:-}" ]; then
    # shellcheck source=/dev/null
    source "$REPO/testdata/record_restart.sh" # serve_start, serve_stop
    PATH="$shims:$PATH" serve_start "$data" "$dir/serve.err" || { cat "$dir/serve.err" >&2; live_fail "baton serve did not start"; }
    echo "record.sh: live: in baton serve (pid $SERVE_PID)" >&2
  fi
  local start=$SECONDS rc=0
  PATH="$shims:$PATH" timeout 600 "$BIN/baton" run --log-level "${BATON_LOG_LEVEL:-warn}" --data "$data" --cwd "$ws" \
    --worktree --base "$base" --provider "$PROVIDER" --approve accept "$task" \
    >"$dir/run.out" 2>"$dir/run.err" </dev/null || rc=$?
  cat "$dir/run.out"
  if [ "$rc" -ne 0 ]; then
    cat "$dir/run.err" >&2
    live_fail "baton run exited with status $rc, want 0"
  fi
  echo "record.sh: live: baton run took $((SECONDS - start))s for ${names[*]} at once" >&2
  stop_modelserver
  local consumed
  for p in "${names[@]}"; do
    consumed=$(sed -n 's/.*stopped; \([0-9]*\) script replies consumed.*/\1/p' "${mserr[$p]}")
    if [ "$consumed" != "${replies[$p]}" ]; then
      cat "${mserr[$p]}" >&2
      live_fail "$p consumed ${consumed:-?} of ${replies[$p]} scripted model replies"
    fi
  done

  # 4. One commit on each branch, with its agent's file; the runs at once.
  local -A thread=() heads=()
  local id
  for p in "${names[@]}"; do
    id=$(live_thread "$data" "$p") || live_fail "no $p thread in baton threads"
    thread[$p]=$id
    live_check_branch "$data" "$ws" "$id" "$p" || live_fail "$p's branch is not as it should be"
  done

  live_check_overlap "$data" "${thread[${names[0]}]}" "${thread[${names[1]}]}" ||
    live_fail "the two threads' runs did not run at once"

  # 5. Both merged into the base branch.
  start=$SECONDS
  for p in "${names[@]}"; do
    "$BIN/baton" merge --data "$data" "${thread[$p]}" >>"$dir/merge.out" 2>>"$dir/merge.err" </dev/null ||
      { cat "$dir/merge.out" "$dir/merge.err" >&2; live_fail "baton merge ${thread[$p]} ($p) failed"; }
  done
  cat "$dir/merge.out"
  live_check_merges "$ws" "$base" || live_fail "$base's history is not the merges'"
  local want got
  want=$({ echo README.md; printf '%s.txt\n' "${names[@]}"; } | LC_ALL=C sort)
  got=$(git -C "$ws" ls-tree --name-only "$base")
  if [ "$got" != "$want" ]; then
    live_fail "$base holds $(echo $got) after the merges, want $(echo $want)"
  fi
  for p in "${names[@]}"; do
    [ "$(git -C "$ws" show "$base:$p.txt")" = "written by $p" ] ||
      live_fail "$base's $p.txt says '$(git -C "$ws" show "$base:$p.txt")'"
  done
  echo "record.sh: live: merged ${names[*]} into $base in $((SECONDS - start))s: $(git -C "$ws" rev-list --count "$base") commits, files $(echo $got)" >&2

  # 6. The user's worktree as it was.
  if [ "$(user_worktree "$ws")" != "$before" ]; then
    diff <(echo "$before") <(user_worktree "$ws") >&2 || true
    live_fail "the threads or the merges touched the user's worktree"
  fi
  echo "record.sh: live: the user's worktree is as it was" >&2
  if [ -n "$SERVE_PID" ]; then
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID" || { rc=$?; SERVE_PID=; cat "$dir/serve.err" >&2; live_fail "baton serve exited with status $rc after SIGTERM, want 0"; }
    SERVE_PID=
  fi
  echo "record.sh: live: worktrees OK" >&2
}

# live_fail MSG ends the run with MSG, keeping the temp directories (the
# run's in $dir) for a look.
live_fail() {
  KEEP_TMP=1
  die "$* (logs kept in $dir)"
}

# live_thread DATA P is the id of the one thread on provider P in DATA.
live_thread() {
  local -a ids
  mapfile -t ids < <("$BIN/baton" threads --data "$1" -o ids --provider "$2")
  [ ${#ids[@]} -eq 1 ] || { echo "record.sh: $2 has ${#ids[@]} threads, want 1: ${ids[*]}" >&2; return 1; }
  echo "${ids[0]}"
}

# live_check_branch DATA WS ID P checks thread ID's branch in the
# repository WS: one commit on the base, the head the thread says, adding
# P.txt alone ("written by P"), with the thread's trailers; its worktree
# clean. It sets heads[P] to the branch's commit.
live_check_branch() {
  local data=$1 ws=$2 id=$3 p=$4 w
  w=$("$BIN/baton" show --data "$data" --json "$id" | jq -c .worktree) || return 1
  local branch base head path
  branch=$(jq -r .branch <<<"$w") base=$(jq -r .base <<<"$w") head=$(jq -r .head <<<"$w") path=$(jq -r .path <<<"$w")
  local fail=
  [ "$(git -C "$ws" rev-list "$base..$branch")" = "$head" ] || fail="its commits since the base are not one, the thread's head $head"
  [ "$(git -C "$ws" rev-parse "$head^")" = "$base" ] || fail="its commit's parent is not the base $base"
  [ "$(git -C "$ws" diff-tree --no-commit-id --name-status -r "$head")" = "$(printf 'A\t%s.txt' "$p")" ] || fail="its commit does not add $p.txt alone"
  [ "$(git -C "$ws" show "$head:$p.txt")" = "written by $p" ] || fail="$p.txt does not say 'written by $p'"
  local trailers
  trailers=$(git -C "$ws" log -1 --format='%(trailers:key=Baton-Thread,key=Baton-Provider,valueonly,separator=%x20)' "$head")
  [ "$trailers" = "$id $p" ] || fail="its trailers say '$trailers', want '$id $p'"
  [ -z "$(git -C "$path" status --porcelain)" ] || fail="its worktree $path is not clean"
  if [ -n "$fail" ]; then
    echo "record.sh: $p's branch $branch: $fail" >&2
    git -C "$ws" log --stat "$base..$branch" >&2
    return 1
  fi
  heads[$p]=$head
  echo "record.sh: live: $p ($id): one commit on $branch, ${head:0:12}, adding $p.txt" >&2
}

# live_check_overlap DATA A B checks that the first runs of threads A and
# B ran at once: each started before the other ended. It says how long
# each took.
live_check_overlap() {
  local data=$1 a=$2 b=$3 t
  local -a times=()
  for t in "$a" "$b"; do
    times+=($("$BIN/baton" show --data "$data" --json "$t" | jq -r '.runs[0] | .startedAt, .endedAt' | xargs -n1 date +%s.%N -d))
  done
  [ ${#times[@]} -eq 4 ] || { echo "record.sh: the runs' times are ${times[*]}" >&2; return 1; }
  awk -v as="${times[0]}" -v ae="${times[1]}" -v bs="${times[2]}" -v be="${times[3]}" -v pa="${names[0]}" -v pb="${names[1]}" 'BEGIN {
    printf "record.sh: live: %s'"'"'s run took %.1fs, %s'"'"'s %.1fs, %.1fs of it at once\n", pa, ae - as, pb, be - bs, \
      (ae < be ? ae : be) - (as > bs ? as : bs) > "/dev/stderr"
    exit !(as < be && bs < ae)
  }'
}

# live_check_merges WS BASE checks the history of branch BASE after the
# merges of two threads' branches (heads, in the order of names): the first
# fast-forwarded it, the second's merge commit has the two as parents.
live_check_merges() {
  local ws=$1 base=$2 tip
  tip=$(git -C "$ws" rev-parse "$base")
  local want="$tip ${heads[${names[0]}]} ${heads[${names[1]}]}" got
  got=$(git -C "$ws" rev-list --parents -n 1 "$base")
  if [ "$got" != "$want" ] || [ "$(git -C "$ws" rev-list --count "$base")" != 4 ]; then
    echo "record.sh: $base's tip and parents are $got, want $want over 4 commits:" >&2
    git -C "$ws" log --graph --oneline "$base" >&2
    return 1
  fi
}

# live_usual_name P is the program baton runs for provider P when no
# --provider-command is given (the first word of its usual command).
live_usual_name() {
  case $1 in
    codex) echo codex ;;
    claude) echo claude ;;
    *) die "no usual command known for $1 in testdata/live_worktrees.sh" ;;
  esac
}

# live_shim P FILE ARGV... writes FILE, a program that runs the agent of
# ARGV (replaypeer record's command: what follows its first "--"). The
# words baton's usual command adds after the program's name (codex's
# app-server) come from baton, and the "--" the recorder's --invocation
# ends claude's command with is dropped.
live_shim() {
  local provider=$1 file=$2 i
  shift 2
  local -a argv=("$@")
  for i in "${!argv[@]}"; do
    [ "${argv[i]}" = -- ] && break
  done
  local -a agent=("${argv[@]:i+1}")
  case $provider in
    codex) [ "${agent[-1]}" = app-server ] || die "codex's command does not end in app-server: ${agent[*]}" ;;
    claude) [ "${agent[-1]}" = -- ] || die "claude's command does not end in --: ${agent[*]}" ;;
  esac
  unset 'agent[-1]'
  local w
  {
    echo '#!/bin/sh'
    printf 'exec'
    for w in "${agent[@]}"; do printf ' %s' "$(quote "$w")"; done
    echo ' "$@"'
  } >"$file"
  chmod +x "$file"
}

# user_worktree WS prints what no thread may change in the user's worktree
# WS: every file's hash (untracked ones too), the index's and HEAD's, and
# git status, read without refreshing the index.
user_worktree() {
  local ws=$1
  (cd "$ws" && find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum)
  sha256sum "$ws/.git/index" "$ws/.git/HEAD"
  GIT_OPTIONAL_LOCKS=0 git -C "$ws" status --porcelain=v2 --branch --untracked-files=all
}
