// The thread page at /threads/ID: the thread's facts, its runs (the newest
// first shown, earlier ones on demand), their requests and checkpoints,
// the composer, and the thread's provider and unattended policy.
import { Component, type ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Capabilities, DiffResponse, Message, Node, Run, RuntimeRequest, Thread, TurnItem } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { isActive, ThreadModel } from "./threadmodel";
import { useCell, now } from "./store";
import { base, listPlugins, pendingOf, stateLabels, stateOf } from "./state";
import { ago, iso, ms } from "./time";
import { Link } from "./router";
import { Connection } from "./connection";
import { DiffView } from "./diff";
import { PolicyPanel, ProviderPanel } from "./threadpanels";

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
  const summary = th.summary;
  const state = summary ? stateOf(summary, pendingOf(th).length) : undefined;
  const active = th.activeRunId ? runs.find((r) => r.id === th.activeRunId) : undefined;

  return (
    <main data-thread-page={id} class="thread-page">
      <p>
        <Link href="/">← Threads</Link>
      </p>
      <div class="thread-head">
        <h1>{model.title()}</h1>
        {state && <span class={`badge ${state}`} data-role="thread-state" data-state={state}>{stateLabels[state]}</span>}
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
        <span>{th.page?.runs ?? runs.length} runs</span>
        <span>approvals: {th.approvalPolicy || "decline"}</span>
        <time dateTime={iso(ms(th.updatedAt))}>updated {ago(ms(th.updatedAt), t)}</time>
        {th.archived && <span>archived</span>}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
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

interface RunProps {
  run: Run;
  ver: number;
  model: ThreadModel;
  threadId: string;
  onRollback(ordinal: number, checkpointId: string): void;
}

// RunView is one run. It renders again only when its run changed (ver),
// so that a thread of many runs costs one run's render per event.
class RunView extends Component<RunProps> {
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
          <time class="muted" dateTime={iso(ms(run.startedAt || run.queuedAt))}>
            {new Date(ms(run.startedAt || run.queuedAt) || Date.now()).toLocaleString()}
          </time>
          {run.usage && run.usage.totalTokens > 0n && <span class="muted">{String(run.usage.totalTokens)} tokens</span>}
        </div>
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
        {rest.map((x) => (x.$typeName === "baton.v1.Message" ? <MessageView m={x} model={model} /> : <ItemView it={x} />))}
        {requests.map((q) => (
          <RequestView q={q} threadId={threadId} />
        ))}
        {run.pendingRestart.map((s) => (
          <p class="muted">Steering after restart: {s.text}</p>
        ))}
        {run.limit && (
          <p class="muted">
            Hit {run.provider} {run.limit.description || run.limit.kind}
            {run.waits > 0 && ` (${run.waits} wait${run.waits === 1 ? "" : "s"})`}
          </p>
        )}
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
        <details class="subagent" open data-node-id={n.id}>
          <summary>
            Subagent: {n.title || it?.title || n.id} <span class="muted">{n.status}</span>
          </summary>
          {it && it.text && <pre>{tail(it.text)}</pre>}
          {kids}
        </details>
      );
    }
    return (
      <>
        {m && <MessageView m={m} model={model} />}
        {it && <ItemView it={it} />}
        {kids}
      </>
    );
  };
  return roots.map(render);
}

function UserText({ text }: { text: string }) {
  return (
    <div class="msg user">
      <div class="who">you</div>
      <div class="text" data-role="user-text">
        {text}
      </div>
    </div>
  );
}

function MessageView({ m, model }: { m: Message; model: ThreadModel }) {
  if (m.role !== "assistant") return <UserText text={m.text} />;
  return (
    <div class="msg assistant" data-message-id={m.id}>
      <div class="who">assistant{m.status && m.status !== "completed" ? ` · ${m.status}` : ""}</div>
      <AssistantText m={m} model={model} />
    </div>
  );
}

// AssistantText is the element streamed text is appended to: the render
// never writes its text; the model's sink does, once a frame.
function AssistantText({ m, model }: { m: Message; model: ThreadModel }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => model.sink.attach(m.id, ref.current!), [m, model]);
  return <div class="text" data-role="assistant-text" ref={ref} />;
}

// tail is the end of a long output.
function tail(text: string, lines = 40): string {
  const all = text.split("\n");
  return all.length > lines ? "…\n" + all.slice(-lines).join("\n") : text;
}

const itemKinds: Record<string, string> = {
  command_execution: "command",
  file_change: "files",
  tool_call: "tool",
  reasoning: "reasoning",
  plan: "plan",
  web_search: "search",
};

function ItemView({ it }: { it: TurnItem }) {
  const kind = itemKinds[it.kind] ?? it.kind;
  const detail = it.detail ? pretty(it.detail) : "";
  const body = it.text ? tail(it.text) : "";
  return (
    <details class={`item item-${it.kind}`} data-item-id={it.id} data-kind={it.kind} open={it.kind === "plan" || it.status === "in_progress"}>
      <summary>
        <span class="kind">{kind}</span>
        {it.title || it.id} <span class={`muted status-${it.status}`}>{it.status}</span>
      </summary>
      {body && <pre aria-label="Output">{body}</pre>}
      {detail && <pre aria-label="Detail">{detail}</pre>}
    </details>
  );
}

function pretty(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

// decisionOf is the answer a provider's option stands for.
const decisionOf: Record<string, string> = {
  allow_once: "accept",
  allow_always: "accept_for_session",
  reject_once: "decline",
  reject_always: "decline",
};

const decisionLabels: Record<string, string> = {
  accept: "Accept",
  accept_for_session: "Accept for the session",
  decline: "Decline",
  cancel: "Cancel the turn",
};

// choicesOf are the buttons a request shows: the provider's options (one
// per decision, in its order, with its words), then cancel.
function choicesOf(q: RuntimeRequest): { decision: string; label: string }[] {
  const out: { decision: string; label: string }[] = [];
  const seen = new Set<string>();
  for (const o of q.options) {
    const d = decisionOf[o.kind];
    if (!d || seen.has(d)) continue;
    seen.add(d);
    out.push({ decision: d, label: o.label || decisionLabels[d]! });
  }
  if (out.length === 0) {
    for (const d of ["accept", "accept_for_session", "decline"]) out.push({ decision: d, label: decisionLabels[d]! });
  }
  out.push({ decision: "cancel", label: decisionLabels.cancel! });
  return out;
}

function RequestView({ q, threadId }: { q: RuntimeRequest; threadId: string }) {
  const [busy, setBusy] = useState("");
  const [error, setError] = useState("");
  if (q.status !== "pending") {
    return (
      <p class="muted" data-request-id={q.id} data-request-status={q.status}>
        {q.kind} “{q.title}”: {q.status}
        {q.decision && ` (${q.decision}`}
        {q.answeredBy && ` by ${q.answeredBy}`}
        {q.decision && ")"}
      </p>
    );
  }
  const answer = async (decision: string) => {
    setBusy(decision);
    setError("");
    try {
      await api.answerRequest({ commandId: commandId(), threadId, requestId: q.id, decision });
    } catch (err) {
      setError(describe(err));
      setBusy("");
    }
  };
  return (
    <div class="request" data-request-id={q.id} role="group" aria-label={`Request: ${q.title}`}>
      <div>
        <strong>{q.kind.replaceAll("_", " ")}</strong>: {q.title}
      </div>
      {q.delivery === "not_resumable" && <p class="muted">The provider's process is gone: an answer cannot reach it.</p>}
      <div class="choices">
        {choicesOf(q).map((c) => (
          <button
            type="button"
            data-decision={c.decision}
            class={c.decision === "accept" ? "primary" : c.decision === "cancel" ? "danger" : ""}
            disabled={busy !== ""}
            onClick={() => void answer(c.decision)}
          >
            {c.label}
          </button>
        ))}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

function CheckpointView(props: {
  threadId: string;
  run: Run;
  id: string;
  status: string;
  files: { path: string; kind: string; additions: bigint; deletions: bigint; binary: boolean }[];
  onRollback(ordinal: number, checkpointId: string): void;
}) {
  const { threadId, run, id, status, files } = props;
  const [diff, setDiff] = useState<DiffResponse | undefined>();
  const [open, setOpen] = useState(false);
  const [error, setError] = useState("");
  const toggle = async () => {
    if (open) {
      setOpen(false);
      return;
    }
    setOpen(true);
    if (diff) return;
    try {
      setDiff(await api.diff({ threadId, run: run.ordinal }));
    } catch (err) {
      setError(describe(err));
    }
  };
  const ready = status === "ready";
  return (
    <div data-checkpoint-id={id} data-checkpoint-status={status}>
      <div class="checkpoint">
        <span class="muted">
          Checkpoint {status}
          {files.length > 0 && `: ${files.length} file${files.length === 1 ? "" : "s"} changed`}
        </span>
        {ready && files.length > 0 && (
          <button type="button" data-action="diff" aria-expanded={open} onClick={() => void toggle()}>
            {open ? "Hide diff" : "Show diff"}
          </button>
        )}
        {ready && (
          <button type="button" data-action="rollback" onClick={() => props.onRollback(run.ordinal, id)}>
            Roll back to here
          </button>
        )}
      </div>
      {files.length > 0 && (
        <ul class="files">
          {files.map((f) => (
            <li>
              <code>{f.path}</code> <span class="muted">{f.kind}</span>{" "}
              {f.binary ? (
                <span class="muted">binary</span>
              ) : (
                <>
                  <span class="add">+{String(f.additions)}</span> <span class="del">−{String(f.deletions)}</span>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      {open && error && (
        <p class="error" role="alert">
          Could not read the diff: {error}
        </p>
      )}
      {open && diff && <DiffView patch={diff.patch} truncated={diff.truncated} size={diff.size} />}
    </div>
  );
}

function RollbackDialog(props: { threadId: string; ordinal: number; checkpointId: string; onClose(): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const confirm = async () => {
    setBusy(true);
    try {
      await api.rollback({ commandId: commandId(), threadId: props.threadId, checkpointId: props.checkpointId });
      ref.current?.close();
    } catch (err) {
      setError(describe(err));
      setBusy(false);
    }
  };
  return (
    <dialog ref={ref} onClose={props.onClose} aria-labelledby="rollback-title">
      <h2 id="rollback-title">Roll back to run {props.ordinal}?</h2>
      <p>
        The thread's files go back to how they were after run {props.ordinal}, and the provider's conversation to the
        same point. The runs after it are marked rolled back; the files as they are now are saved under a ref.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="row">
        <button type="button" data-action="cancel-rollback" onClick={() => ref.current?.close()}>
          Keep the files
        </button>
        <button type="button" class="danger" data-action="confirm-rollback" disabled={busy} onClick={() => void confirm()}>
          Roll back
        </button>
      </div>
    </dialog>
  );
}

// Composer sends a message: a new run on an idle thread; while a run is
// active, what the chosen mode says (the modes the provider allows).
function Composer({ thread, active, caps }: { thread: Thread; active?: Run; caps?: Capabilities }) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const running = active !== undefined && isActive(active.status);
  const modes: { value: string; label: string }[] = [{ value: "", label: "the provider's default" }, { value: "queue", label: "queue after this run" }];
  if (caps?.nativeSteering) modes.push({ value: "steer", label: "steer this run" });
  if (caps?.interrupt !== false) modes.push({ value: "restart", label: "restart this run with it" });
  const send = async () => {
    if (!text.trim()) return;
    setBusy(true);
    setError("");
    try {
      await api.sendMessage({
        commandId: commandId(),
        threadId: thread.id,
        text,
        mode: running ? mode : "",
        targetRunId: running && (mode === "steer" || mode === "restart") ? active!.id : "",
      });
      setText("");
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  const interrupt = async () => {
    setError("");
    try {
      await api.interrupt({ commandId: commandId(), threadId: thread.id, runId: active?.id ?? "" });
    } catch (err) {
      setError(describe(err));
    }
  };
  if (thread.archived) return <p class="muted">This thread is archived: it takes no more messages.</p>;
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <label class="sr-only" for="composer">
        Message
      </label>
      <textarea
        id="composer"
        data-role="composer"
        placeholder={running ? "Message the running agent…" : "Message the agent…"}
        value={text}
        onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <div class="row">
        <button type="submit" class="primary" data-action="send" disabled={busy || !text.trim()}>
          Send
        </button>
        {running && (
          <label>
            <span class="muted">While run {active!.ordinal} is {active!.status}: </span>
            <select value={mode} aria-label="How the message joins the active run" onChange={(e) => setMode((e.currentTarget as HTMLSelectElement).value)}>
              {modes.map((m) => (
                <option value={m.value}>{m.label}</option>
              ))}
            </select>
          </label>
        )}
        <button type="button" data-action="interrupt" disabled={!running || caps?.interrupt === false} onClick={() => void interrupt()}>
          Interrupt
        </button>
        <span class="muted">Ctrl+Enter sends</span>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}
