// One run on the thread page: its attempts, its node tree with the
// messages and items that are its nodes', its requests, how it ended and
// its checkpoint.
import { Component, type ComponentChildren, Fragment } from "preact";
import { useState } from "preact/hooks";
import type { Message, Node, Run, TurnItem } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { isActive, type ThreadModel } from "./threadmodel";
import { iso, ms } from "./time";
import { ItemView, MessageView, UserText, tail } from "./items";
import { RequestView } from "./request";
import { CheckpointView } from "./checkpoint";
import { Alert } from "./alert";

export interface RunProps {
  run: Run;
  ver: number;
  model: ThreadModel;
  threadId: string;
  onRollback(ordinal: number, checkpointId: string): void;
}

// RunView is one run. It renders again only when its run changed (ver),
// so that a thread of many runs costs one run's render per event.
export class RunView extends Component<RunProps> {
  shouldComponentUpdate(next: RunProps): boolean {
    return next.ver !== this.props.ver || next.run !== this.props.run;
  }

  render({ run, model, threadId, onRollback }: RunProps) {
    const messages = model.messagesOf(run.id);
    const items = model.itemsOf(run.id);
    const requests = model.requestsOf(run.id);
    const checkpoint = run.checkpointId ? model.checkpoint(run.checkpointId) : undefined;
    const input = messages.find((m) => m.id === run.messageId);
    const placed = new Set<string>();
    if (input) placed.add(input.id);
    const tree = nodeTree(run, messages, items, placed, model);
    const rest = [...messages.filter((m) => !placed.has(m.id)), ...items.filter((i) => !placed.has(i.id))];
    return (
      <section class="run" data-run-id={run.id} data-run-status={run.status} aria-label={`Run ${run.ordinal}`}>
        <div class="run-head">
          <strong>Run {run.ordinal}</strong>
          <span class={`status-${run.status}`}>{run.status}</span>
          {run.provider && (
            <span class="muted">
              {run.provider}
              {run.model && ` · ${run.model}`}
            </span>
          )}
          {run.host && <span class="muted" title="the host that ran it, on a log several hosts share">on host {run.host}</span>}
          <time class="muted" dateTime={iso(ms(run.startedAt || run.queuedAt))}>
            {new Date(ms(run.startedAt || run.queuedAt) || Date.now()).toLocaleString()}
          </time>
          {run.usage && run.usage.totalTokens > 0n && <span class="muted">{String(run.usage.totalTokens)} tokens</span>}
          {run.commit && (
            <code class="muted" title={`the run's commit on the thread's branch: ${run.commit}`}>
              {run.commit.slice(0, 12)}
            </code>
          )}
        </div>
        {run.status === "queued" && <CancelQueued threadId={threadId} runId={run.id} />}
        {run.attempts.length > 1 && (
          <ol class="attempts" aria-label="Attempts">
            {run.attempts.map((a) => (
              <li data-attempt-id={a.id}>
                {a.reason} · {a.status}
                {a.provider && ` · ${a.provider}`}
              </li>
            ))}
          </ol>
        )}
        {input ? <MessageView m={input} model={model} /> : run.input && <UserText text={run.input} />}
        {tree}
        {rest.map((x) =>
          x.$typeName === "baton.v1.Message" ? <MessageView key={x.id} m={x} model={model} /> : <ItemView key={x.id} it={x} />,
        )}
        {requests.map((q) => (
          <RequestView key={q.id} q={q} threadId={threadId} />
        ))}
        {run.interruptRequested && isActive(run.status) && (
          <p class="muted" data-role="stopping">
            Stopping: the provider was asked to stop the turn.
          </p>
        )}
        {run.pendingRestart.map((s) => (
          <p class="muted">Steering after restart: {s.text}</p>
        ))}
        {run.limit && (
          <p class="muted">
            Hit {run.provider} {run.limit.description || run.limit.kind}
            {run.waits > 0 && ` (${run.waits} wait${run.waits === 1 ? "" : "s"})`}
          </p>
        )}
        {model.diagnosticsOf(run.id).map((d) => (
          <details class="item diagnostic" data-role="diagnostic">
            <summary>
              <span class="kind">note</span>
              {d.title}
            </summary>
            {d.text && <pre>{d.text}</pre>}
          </details>
        ))}
        {run.failure && (
          <p class="error">
            {run.failure.code}: {run.failure.message}
          </p>
        )}
        {run.stopReason && !run.failure && <p class="muted">Stopped: {run.stopReason}</p>}
        {checkpoint && (
          <CheckpointView
            threadId={threadId}
            run={run}
            id={checkpoint.id}
            status={checkpoint.status}
            files={checkpoint.files}
            onRollback={onRollback}
          />
        )}
      </section>
    );
  }
}

// CancelQueued cancels a run that waits for the runs before it.
function CancelQueued({ threadId, runId }: { threadId: string; runId: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const cancel = async () => {
    setBusy(true);
    try {
      await api.cancelQueued({ commandId: commandId(), threadId, runIds: [runId] });
    } catch (err) {
      setError(describe(err));
      setBusy(false);
    }
  };
  return (
    <p class="muted">
      Queued behind the runs before it.{" "}
      <button type="button" data-action="cancel-queued" disabled={busy} onClick={() => void cancel()}>
        Cancel this run
      </button>
      {error && " "}
      <Alert error={error} inline />
    </p>
  );
}

// nodeTree renders a run's nodes in the order they started, each
// attempt's tree under its root, subagents nested; a node shows the
// message or item that is its.
function nodeTree(
  run: Run,
  messages: Message[],
  items: TurnItem[],
  placed: Set<string>,
  model: ThreadModel,
): ComponentChildren {
  if (run.nodes.length === 0) return null;
  const children = new Map<string, Node[]>();
  const ids = new Set(run.nodes.map((n) => n.id));
  const roots: Node[] = [];
  for (const n of run.nodes) {
    if (n.parentId && ids.has(n.parentId)) {
      const list = children.get(n.parentId);
      if (list) list.push(n);
      else children.set(n.parentId, [n]);
    } else roots.push(n);
  }
  const messageOf = new Map(messages.map((m) => [m.nodeId, m]));
  const itemOf = new Map(items.map((i) => [i.nodeId, i]));
  const render = (n: Node): ComponentChildren => {
    const kids = (children.get(n.id) ?? []).map(render);
    const m = messageOf.get(n.id);
    const it = itemOf.get(n.id);
    if (m) placed.add(m.id);
    if (it) placed.add(it.id);
    if (n.kind === "subagent") {
      return (
        <details key={n.id} class="subagent" open data-node-id={n.id}>
          <summary>
            Subagent: {n.title || it?.title || n.id} <span class="muted">{n.status}</span>
          </summary>
          {it && it.text && <pre>{tail(it.text)}</pre>}
          {kids}
        </details>
      );
    }
    return (
      <Fragment key={n.id}>
        {m && <MessageView m={m} model={model} />}
        {it && <ItemView it={it} />}
        {kids}
      </Fragment>
    );
  };
  return roots.map(render);
}
