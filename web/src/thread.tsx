// The thread page at /threads/ID: the thread's facts, its runs (the newest
// first shown, earlier ones on demand), the composer, and the thread's
// provider and unattended policy.
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Capabilities } from "./gen/baton_pb";
import { ThreadModel } from "./threadmodel";
import { useCell, now } from "./store";
import { base, hostLostLine, listPlugins, stateLabels, stateOfThread } from "./state";
import { ago, iso, ms } from "./time";
import { Link } from "./router";
import { Connection } from "./connection";
import { PolicyPanel, ProviderPanel } from "./threadpanels";
import { WaitLine } from "./wait";
import { RunView } from "./run";
import { RollbackDialog } from "./checkpoint";
import { Composer } from "./composer";
import { Alert } from "./alert";

// runsPerStep is how many more runs "show earlier" shows.
const runsPerStep = 20;

export function ThreadPage({ id }: { id: string }) {
  const model = useMemo(() => new ThreadModel(id), [id]);
  useEffect(() => {
    void model.start();
    return () => model.stop();
  }, [model]);
  useCell(model.version);
  const live = useCell(model.live);
  const error = useCell(model.error);
  const loadingEarlier = useCell(model.loadingEarlier);
  const t = useCell(now);
  const [shown, setShown] = useState(runsPerStep);
  const [caps, setCaps] = useState<Capabilities | undefined>();
  const [rollback, setRollback] = useState<{ ordinal: number; checkpointId: string } | undefined>();
  const th = model.t;
  useEffect(() => {
    if (th) performance.mark("baton:thread-shown");
  }, [th !== undefined]);
  const title = th ? model.title() : id;
  useEffect(() => {
    document.title = `${title} · Baton`;
  }, [title]);
  useEffect(() => {
    if (!th?.provider) return;
    listPlugins().then(
      (ps) => setCaps(ps.find((p) => p.name === th.provider)?.capabilities),
      () => setCaps(undefined),
    );
  }, [th?.provider]);

  if (!th) {
    return (
      <main data-thread-page={id}>
        <p>
          <Link href="/">← Threads</Link>
        </p>
        {error ? (
          <p class="error" role="alert">
            Could not read thread {id}: {error}
          </p>
        ) : (
          <p class="muted">Loading thread…</p>
        )}
      </main>
    );
  }

  const runs = model.runs();
  const visible = runs.slice(Math.max(0, runs.length - shown));
  const hidden = (visible[0]?.ordinal ?? 1) - 1;
  const showEarlier = async () => {
    if (runs.length <= shown) await model.loadEarlier();
    setShown((n) => n + runsPerStep);
  };
  const state = stateOfThread(th, runs);
  const active = th.activeRunId ? runs.find((r) => r.id === th.activeRunId) : undefined;
  // baseline is the checkpoint before the first run, which a rollback can
  // return to as it can to any run's.
  const baseline = th.checkpoints.find((c) => c.runOrdinal === 0 && c.runId === "" && c.status === "ready");

  return (
    <main data-thread-page={id} class="thread-page" data-loaded="true">
      <p>
        <Link href="/">← Threads</Link>
      </p>
      <div class="thread-head">
        <h1>{title}</h1>
        <span class={`badge ${state}`} data-role="thread-state" data-state={state}>
          {stateLabels[state]}
        </span>
        <Connection live={live} />
      </div>
      <div class="facts muted">
        <span>
          {th.provider}
          {th.model && ` · ${th.model}`}
        </span>
        <span title={th.cwd}>{base(th.cwd)}</span>
        {th.worktree && (
          <span title={th.worktree.path}>
            ⎇ {th.worktree.branch} ({th.worktree.status})
          </span>
        )}
        <span>{plural(th.page?.runs ?? runs.length, "run")}</span>
        <span>approvals: {th.approvalPolicy || "decline"}</span>
        <time dateTime={iso(ms(th.updatedAt))}>updated {ago(ms(th.updatedAt), t)}</time>
        {th.archived && <span>archived</span>}
      </div>
      <Alert error={error} />
      {th.hostLost && (
        <p class="host-lost" data-role="host-lost">
          {hostLostLine(th.hostLost, th.sharedCwd)}
        </p>
      )}
      {state === "waiting" && th.loop?.wait?.at && (
        <WaitLine
          threadId={id}
          at={th.loop.wait.at}
          provider={th.loop.wait.provider}
          what={th.loop.wait.limit?.description || "limit"}
          runId={th.loop.wait.runId}
        />
      )}
      <PolicyPanel thread={th} />
      <ProviderPanel thread={th} />
      {hidden > 0 && (
        <div class="earlier">
          <span class="muted">
            {hidden} earlier run{hidden === 1 ? "" : "s"} not shown.
          </span>
          <button type="button" data-action="show-earlier" onClick={() => void showEarlier()} disabled={loadingEarlier}>
            {loadingEarlier ? "Loading…" : "Show earlier"}
          </button>
        </div>
      )}
      {runs.length === 0 && <p class="muted">No runs yet: send the first message below.</p>}
      {hidden === 0 && baseline && runs.length > 0 && (
        <div class="checkpoint" data-role="baseline">
          <span class="muted">The files before the first run are kept.</span>
          <button type="button" data-action="rollback-start" onClick={() => setRollback({ ordinal: 0, checkpointId: baseline.id })}>
            Roll back to the start
          </button>
        </div>
      )}
      <div class="runs">
        {visible.map((r) => (
          <RunView
            key={r.id}
            run={r}
            ver={model.runVersion.get(r.id) ?? 0}
            model={model}
            threadId={id}
            onRollback={(ordinal, checkpointId) => setRollback({ ordinal, checkpointId })}
          />
        ))}
      </div>
      <Composer thread={th} active={active} caps={caps} />
      {rollback && (
        <RollbackDialog threadId={id} {...rollback} onClose={() => setRollback(undefined)} />
      )}
    </main>
  );
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
