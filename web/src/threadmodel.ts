// ThreadModel is one thread as the thread page shows it: the projection
// GetThread gives, then every event after its sequence from Subscribe,
// applied as the host's domain applies it (host/internal/domain/evolve.go).
//
// What it keeps, and why:
//   - t: the newest projection, changed in place by the events it knows;
//     an event it does not apply itself (rollbacks, checkpoints, handoffs,
//     policy, waits) makes it read the projection again, after a short
//     delay that gathers a burst into one call. Events that arrive while
//     that call is out are kept and applied again to the new projection
//     when they are past its sequence.
//   - older: pages of runs read on demand ("show earlier"), before the
//     projection's first run.
//   - the indexes (messages, items, requests by run; messages and items by
//     id; checkpoints by id) over both, kept as events are applied; a
//     rollback marks the runs it rolls back in both.
//   - runVersion: a number per run that changes when anything of that run
//     does, so that the page re-renders only the runs that changed.
//   - streaming text goes to the page outside the render: a message's text
//     grows in the model and the message id is marked; once a frame the
//     marked messages' elements get the new text appended (see TextSink).
import { create } from "@bufbuild/protobuf";
import {
  AttemptSchema,
  type Checkpoint,
  type Diagnostic,
  type Event,
  HostLostSchema,
  type Message,
  MessageSchema,
  NodeSchema,
  type Run,
  RunSchema,
  type RuntimeRequest,
  RuntimeRequestSchema,
  type Thread,
  type TurnItem,
  TurnItemSchema,
} from "./gen/baton_pb";
import { api, describe, signedOut } from "./api";
import { follow } from "./stream";
import { Cell, session } from "./store";
import { notify, waitBody } from "./notify";
import { shorten } from "./state";

// refetchDelay gathers the events that need a new projection into one
// GetThread.
const refetchDelay = 200;
// pageRuns is how many earlier runs one "show earlier" reads.
export const pageRuns = 50;

// TextSink appends streamed text to the elements that show it, once a
// frame. An element registers with the length of text it shows.
export class TextSink {
  private els = new Map<string, { el: HTMLElement; shown: number }>();
  private dirty = new Set<string>();
  private frame = 0;

  constructor(private text: (id: string) => string | undefined) {}

  attach(id: string, el: HTMLElement): () => void {
    const text = this.text(id) ?? "";
    el.textContent = text;
    const entry = { el, shown: text.length };
    this.els.set(id, entry);
    return () => {
      if (this.els.get(id) === entry) this.els.delete(id);
    };
  }

  grew(id: string): void {
    if (!this.els.has(id)) return;
    this.dirty.add(id);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush(): void {
    this.frame = 0;
    for (const id of this.dirty) {
      const e = this.els.get(id);
      const text = this.text(id);
      if (!e || text === undefined || text.length <= e.shown) continue;
      const tail = text.slice(e.shown);
      const last = e.el.lastChild;
      if (last instanceof Text) last.appendData(tail);
      else e.el.append(tail);
      e.shown = text.length;
    }
    this.dirty.clear();
  }

  stop(): void {
    cancelAnimationFrame(this.frame);
  }
}

export class ThreadModel {
  t?: Thread;
  older: Thread[] = [];
  readonly version = new Cell(0);
  readonly live = new Cell(false);
  readonly error = new Cell("");
  readonly loadingEarlier = new Cell(false);
  readonly runVersion = new Map<string, number>();
  readonly sink = new TextSink((id) => this.messageById.get(id)?.text);

  private messageById = new Map<string, Message>();
  private itemById = new Map<string, TurnItem>();
  private messagesOfRun = new Map<string, Message[]>();
  private itemsOfRun = new Map<string, TurnItem[]>();
  private requestsOfRun = new Map<string, RuntimeRequest[]>();
  private diagnosticsOfRun = new Map<string, Diagnostic[]>();
  private checkpointById = new Map<string, Checkpoint>();
  private runById = new Map<string, Run>();
  // rollbacks are the rollbacks under way: the runs and checkpoints each
  // will mark when it completes.
  private rollbacks = new Map<string, { runs: string[]; checkpoints: string[] }>();
  private refetchTimer?: ReturnType<typeof setTimeout>;
  private refetching = false;
  private heldBack: Event[] = [];
  private frame = 0;
  private stopFollow?: () => void;
  private stopped = false;

  constructor(readonly id: string) {}

  async start(): Promise<void> {
    try {
      const t = await api.getThread({ threadId: this.id });
      if (this.stopped) return;
      this.replace(t);
      this.stopFollow = follow({
        threadId: this.id,
        after: t.sequence,
        onEvent: (e) => this.onEvent(e),
        onLive: (l) => this.live.set(l),
      });
    } catch (err) {
      this.fail(err);
    }
  }

  stop(): void {
    this.stopped = true;
    this.stopFollow?.();
    clearTimeout(this.refetchTimer);
    cancelAnimationFrame(this.frame);
    this.sink.stop();
  }

  // runs are every run the page holds, oldest first.
  runs(): Run[] {
    const out: Run[] = [];
    for (const p of this.older) out.push(...p.runs);
    if (this.t) out.push(...this.t.runs);
    return out;
  }

  // firstHeld is the ordinal of the oldest run held (0: none).
  firstHeld(): number {
    const first = this.older[0]?.runs[0] ?? this.t?.runs[0];
    return first?.ordinal ?? 0;
  }

  messagesOf(runId: string): Message[] {
    return this.messagesOfRun.get(runId) ?? [];
  }
  itemsOf(runId: string): TurnItem[] {
    return this.itemsOfRun.get(runId) ?? [];
  }
  requestsOf(runId: string): RuntimeRequest[] {
    return this.requestsOfRun.get(runId) ?? [];
  }
  diagnosticsOf(runId: string): Diagnostic[] {
    return this.diagnosticsOfRun.get(runId) ?? [];
  }
  checkpoint(id: string): Checkpoint | undefined {
    return this.checkpointById.get(id);
  }

  // loadEarlier reads the page of runs before the oldest held.
  async loadEarlier(): Promise<void> {
    const first = this.firstHeld();
    if (first <= 1 || this.loadingEarlier.get()) return;
    this.loadingEarlier.set(true);
    try {
      const from = Math.max(1, first - pageRuns);
      const page = await api.getThread({ threadId: this.id, fromRun: from, toRun: first - 1, maxRuns: pageRuns });
      if (this.stopped) return;
      keepRuns(page, (r) => r.ordinal < first);
      this.older.unshift(page);
      this.index();
      this.changed();
    } catch (err) {
      this.fail(err);
    } finally {
      this.loadingEarlier.set(false);
    }
  }

  // refetchSoon reads the projection again shortly (once for a burst).
  refetchSoon(): void {
    if (this.refetchTimer || this.stopped) return;
    this.refetchTimer = setTimeout(() => {
      this.refetchTimer = undefined;
      void this.refetch();
    }, refetchDelay);
  }

  private async refetch(): Promise<void> {
    if (this.refetching) {
      this.refetchSoon();
      return;
    }
    this.refetching = true;
    this.heldBack = [];
    try {
      const t = await api.getThread({ threadId: this.id });
      if (this.stopped) return;
      const replay = this.heldBack.filter((e) => e.sequence > t.sequence);
      this.replace(t);
      for (const e of replay) this.apply(e);
    } catch (err) {
      this.fail(err);
    } finally {
      this.refetching = false;
      this.heldBack = [];
    }
  }

  private fail(err: unknown): void {
    if (signedOut(err)) session.set("expired");
    else this.error.set(describe(err));
  }

  private replace(t: Thread): void {
    // Runs that have left the projection since the last one stay on the
    // page (as an earlier page), so that what it shows has no gap; earlier
    // pages keep only the runs before the new projection's.
    const first = t.runs[0]?.ordinal ?? Number.MAX_SAFE_INTEGER;
    if (this.t) this.older.push(this.t);
    for (const p of this.older) keepRuns(p, (r) => r.ordinal < first);
    this.older = this.older.filter((p) => p.runs.length > 0);
    this.t = t;
    this.index();
    for (const r of this.runs()) this.touch(r.id);
    this.changed();
  }

  private index(): void {
    this.messageById.clear();
    this.itemById.clear();
    this.messagesOfRun.clear();
    this.itemsOfRun.clear();
    this.requestsOfRun.clear();
    this.diagnosticsOfRun.clear();
    this.checkpointById.clear();
    this.runById.clear();
    // An earlier page adds only what is of its own runs: the rest is in
    // the projection too.
    for (const p of this.older) {
      const own = new Set(p.runs.map((r) => r.id));
      for (const r of p.runs) this.runById.set(r.id, r);
      for (const m of p.messages) if (own.has(m.runId)) this.addMessage(m);
      for (const it of p.turnItems) if (own.has(it.runId)) this.addItem(it);
      for (const q of p.requests) if (own.has(q.runId)) push(this.requestsOfRun, q.runId, q);
      for (const d of p.diagnostics) if (own.has(d.runId)) push(this.diagnosticsOfRun, d.runId, d);
      for (const c of p.checkpoints) this.checkpointById.set(c.id, c);
    }
    const t = this.t;
    if (!t) return;
    for (const r of t.runs) this.runById.set(r.id, r);
    for (const m of t.messages) this.addMessage(m);
    for (const it of t.turnItems) this.addItem(it);
    for (const q of t.requests) push(this.requestsOfRun, q.runId, q);
    for (const d of t.diagnostics) push(this.diagnosticsOfRun, d.runId, d);
    for (const c of t.checkpoints) this.checkpointById.set(c.id, c);
  }

  private addMessage(m: Message): void {
    this.messageById.set(m.id, m);
    push(this.messagesOfRun, m.runId, m);
  }

  private addItem(it: TurnItem): void {
    this.itemById.set(it.id, it);
    push(this.itemsOfRun, it.runId, it);
  }

  private onEvent(e: Event): void {
    if (this.refetching) this.heldBack.push(e);
    this.apply(e);
  }

  // apply changes the model as the event changes the thread; an event it
  // does not know makes it read the projection again.
  private apply(e: Event): void {
    const t = this.t;
    if (!t || e.sequence <= t.sequence) return;
    t.sequence = e.sequence;
    const p = e.payload;
    switch (p.case) {
      case "messageDelta": {
        const m = this.messageById.get(p.value.messageId);
        if (m) {
          m.text += p.value.text;
          this.sink.grew(m.id);
        }
        return;
      }
      case "nodeDelta": {
        const it = this.itemById.get(p.value.nodeId);
        if (it) {
          it.text += p.value.text;
          this.touch(it.runId);
        }
        return;
      }
      case "messageAdded": {
        const v = p.value;
        const m = create(MessageSchema, {
          id: v.messageId,
          runId: v.runId,
          nodeId: v.nodeId,
          role: v.role,
          text: v.text,
          status: v.status,
        });
        t.messages.push(m);
        this.addMessage(m);
        this.touch(v.runId);
        return;
      }
      case "messageCompleted": {
        const m = this.messageById.get(p.value.messageId);
        if (m) {
          m.status = "completed";
          this.touch(m.runId);
        }
        return;
      }
      case "runQueued": {
        const v = p.value;
        const r = create(RunSchema, {
          id: v.runId,
          ordinal: v.ordinal,
          status: "queued",
          messageId: v.messageId,
          input: v.input,
          queuedAt: e.at,
        });
        t.runs.push(r);
        this.runById.set(r.id, r);
        this.touch(r.id);
        this.changed();
        return;
      }
      case "runStarted": {
        const r = this.runById.get(p.value.runId);
        if (r) {
          r.status = "starting";
          r.startedAt = e.at;
          r.provider = p.value.provider || t.provider;
          r.model = p.value.provider ? p.value.model : t.model;
          r.host = p.value.host;
          t.activeRunId = r.id;
          this.touch(r.id);
        }
        this.changed();
        return;
      }
      case "attemptStarted": {
        const v = p.value;
        const r = this.runById.get(v.runId);
        if (r) {
          r.attempts.push(
            create(AttemptSchema, {
              id: v.attemptId,
              reason: v.reason,
              status: "in_progress",
              startedAt: e.at,
              rootNode: v.rootNode,
              provider: v.provider,
            }),
          );
          r.activeAttempt = v.attemptId;
          if (v.reason !== "initial") r.status = "starting";
          this.touch(r.id);
        }
        return;
      }
      case "nodeStarted": {
        const v = p.value;
        const r = this.runById.get(v.runId);
        if (!r) return;
        r.nodes.push(
          create(NodeSchema, {
            id: v.nodeId,
            parentId: v.parentId,
            attemptId: v.attemptId,
            kind: v.kind,
            status: "in_progress",
            providerRef: v.providerRef,
            title: v.title,
          }),
        );
        if (v.kind !== "root_turn" && v.kind !== "assistant_message") {
          const it = create(TurnItemSchema, {
            id: v.nodeId,
            runId: v.runId,
            nodeId: v.nodeId,
            kind: v.kind,
            title: v.title,
            status: "in_progress",
            detail: v.detail,
          });
          t.turnItems.push(it);
          this.addItem(it);
        }
        this.touch(r.id);
        return;
      }
      case "nodeUpdated": {
        const v = p.value;
        const n = this.runById.get(v.runId)?.nodes.find((n) => n.id === v.nodeId);
        if (n) {
          if (v.status) n.status = v.status;
          if (v.title) n.title = v.title;
        }
        const it = this.itemById.get(v.nodeId);
        if (it) {
          if (v.status) it.status = v.status;
          if (v.title) it.title = v.title;
          if (v.detail) it.detail = v.detail;
        }
        this.touch(v.runId);
        return;
      }
      case "nodeCompleted": {
        const v = p.value;
        const n = this.runById.get(v.runId)?.nodes.find((n) => n.id === v.nodeId);
        if (n) n.status = v.status;
        const it = this.itemById.get(v.nodeId);
        if (it) it.status = v.status;
        this.touch(v.runId);
        return;
      }
      case "providerTurnBound": {
        const v = p.value;
        const r = this.runById.get(v.runId);
        const a = r?.attempts.find((a) => a.id === v.attemptId);
        if (r && a && a.rootNode === v.nodeId && r.activeAttempt === v.attemptId && isActive(r.status)) {
          r.status = "running";
          a.sessionId = v.sessionId;
          this.touch(r.id);
          this.changed();
        }
        return;
      }
      case "requestOpened": {
        const v = p.value;
        const q = create(RuntimeRequestSchema, {
          id: v.requestId,
          runId: v.runId,
          nodeId: v.nodeId,
          sessionId: v.sessionId,
          providerRef: v.providerRef,
          kind: v.kind,
          title: v.title,
          options: v.options,
          status: "pending",
          delivery: "live",
          openedAt: e.at,
        });
        t.requests.push(q);
        push(this.requestsOfRun, q.runId, q);
        this.touch(q.runId);
        this.changed();
        notify(`${this.title()} needs you`, v.title || "A request waits for your answer.", this.id, "request");
        return;
      }
      case "requestAnswered": {
        const q = this.request(p.value.requestId);
        if (q) {
          q.decision = p.value.decision;
          q.answeredBy = p.value.by;
          this.touch(q.runId);
        }
        return;
      }
      case "requestResolved": {
        const q = this.request(p.value.requestId);
        if (q) {
          q.status = p.value.status;
          if (p.value.decision) q.decision = p.value.decision;
          if (p.value.delivery) q.delivery = p.value.delivery;
          this.touch(q.runId);
          this.changed();
        }
        return;
      }
      case "usageReported": {
        const r = this.runById.get(p.value.runId);
        if (r) {
          r.usage = p.value.usage;
          this.touch(r.id);
        }
        return;
      }
      case "runEnded": {
        const v = p.value;
        const r = this.runById.get(v.runId);
        if (r) {
          r.status = v.status;
          r.stopReason = v.stopReason;
          r.failure = v.failure;
          r.endedAt = e.at;
          if (t.activeRunId === r.id) t.activeRunId = "";
          this.touch(r.id);
          notify(`${this.title()}: run ${r.ordinal} ${v.status}`, v.failure?.message || v.stopReason, this.id, "run");
        }
        this.changed();
        this.refetchSoon(); // the next queued run, the loop, the summary
        return;
      }
      case "rollbackStarted":
        this.rollbacks.set(p.value.rollbackId, { runs: p.value.runs, checkpoints: p.value.checkpoints });
        this.refetchSoon();
        return;
      case "rollbackCompleted": {
        // The runs it rolls back may have left the projection: the page
        // marks those it holds itself.
        const rb = this.rollbacks.get(p.value.rollbackId);
        this.rollbacks.delete(p.value.rollbackId);
        for (const id of rb?.runs ?? []) {
          const r = this.runById.get(id);
          if (r) {
            r.status = "rolled_back";
            this.touch(r.id);
          }
        }
        for (const id of rb?.checkpoints ?? []) {
          const c = this.checkpointById.get(id);
          if (c) {
            c.status = "stale";
            this.touch(c.runId);
          }
        }
        this.refetchSoon();
        return;
      }
      case "threadHostLost":
        t.hostLost = create(HostLostSchema, { host: p.value.host, at: e.at });
        this.changed();
        return;
      case "threadMoved":
        t.host = p.value.to;
        t.hostLost = undefined;
        this.changed();
        return;
      case "waitArmed":
        notify(`${this.title()} waits`, waitBody(p.value.provider, p.value.at), this.id, "wait");
        this.refetchSoon();
        return;
      case "waitEnded":
        notify(`${this.title()}: the wait ended`, p.value.reason || p.value.outcome, this.id, "wait");
        this.refetchSoon();
        return;
      default:
        if (!quiet.has(p.case)) this.refetchSoon();
    }
  }

  // title is the thread's first message, shortened (the projection's, or
  // its first run's input when the service gave none).
  title(): string {
    const first = this.older[0]?.runs[0] ?? this.t?.runs[0];
    return this.t?.title || (first?.ordinal === 1 ? shorten(first.input, 80) : "") || this.id;
  }

  private request(id: string): RuntimeRequest | undefined {
    for (const list of this.requestsOfRun.values()) {
      const q = list.find((q) => q.id === id);
      if (q) return q;
    }
    return undefined;
  }

  private touch(runId: string): void {
    this.runVersion.set(runId, (this.runVersion.get(runId) ?? 0) + 1);
    this.changed();
  }

  // changed re-renders the page once a frame.
  private changed(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.version.set(this.version.get() + 1);
    });
  }
}

// quiet are the events that change nothing the page shows: they need no
// new projection.
const quiet = new Set<Event["payload"]["case"]>([
  "attemptDispatched",
  "providerSessionOpened",
  "providerSessionEnded",
  "providerThreadBound",
  "effectCancelled",
  "rateLimitReported",
  "checkpointScopeOpened",
]);

export function isActive(status: string): boolean {
  return status === "starting" || status === "running" || status === "waiting";
}

// keepRuns keeps a page's runs that keep says, and what is theirs.
function keepRuns(p: Thread, keep: (r: Run) => boolean): void {
  p.runs = p.runs.filter(keep);
  const own = new Set(p.runs.map((r) => r.id));
  p.messages = p.messages.filter((m) => own.has(m.runId));
  p.turnItems = p.turnItems.filter((i) => own.has(i.runId));
  p.requests = p.requests.filter((q) => own.has(q.runId));
  p.diagnostics = p.diagnostics.filter((d) => own.has(d.runId));
  p.checkpoints = p.checkpoints.filter((c) => own.has(c.runId));
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}
