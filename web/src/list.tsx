// The thread list at /: every thread, grouped by repository (or cwd),
// live from one Subscribe of every thread.
//
// The list starts from ListThreads (every page), subscribes after the
// newest sequence those summaries show, and, on an event, marks that
// thread's last activity at once and re-reads its summary (GetThread
// with one message) after a short delay, so that a burst of events costs
// one call. A thread's title (its first run's input) is read once, when
// its row comes into view.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Event, ThreadSummary, Wait } from "./gen/baton_pb";
import { api, commandId, describe, signedOut } from "./api";
import { follow } from "./stream";
import { Cell, now, session, useCell, useSeconds } from "./store";
import { type ThreadState, base, pendingOf, shorten, stateLabels, stateOf, threadStates } from "./state";
import { ago, countdown, iso, ms } from "./time";
import { Link } from "./router";
import { Connection } from "./connection";
import { notify } from "./notify";

// Entry is what the list holds of one thread.
interface Entry {
  summary: ThreadSummary;
  title?: string;
  // group is the repository a worktree thread was made from, else its cwd.
  group: string;
  pending: number;
  wait?: Wait;
  activity: number;
}

// refreshDelay is how long a thread's events are gathered before its
// summary is read again.
const refreshDelay = 250;
// titleReaders bounds the title calls in flight.
const titleReaders = 4;

class ThreadList {
  readonly entries = new Map<string, Entry>();
  readonly version = new Cell(0);
  readonly live = new Cell(false);
  readonly loaded = new Cell(false);
  readonly error = new Cell("");
  private timers = new Map<string, ReturnType<typeof setTimeout>>();
  private titleQueue: string[] = [];
  private titlesAsked = new Set<string>();
  private titleCalls = 0;
  private frame = 0;
  private stopFollow?: () => void;
  private stopped = false;

  async start(): Promise<void> {
    try {
      let after = 0n;
      let pageToken = "";
      do {
        const page = await api.listThreads({ all: true, pageSize: 1000, pageToken });
        for (const s of page.threads) {
          this.entries.set(s.id, { summary: s, group: s.cwd, pending: 0, activity: ms(s.updatedAt) });
          if (s.sequence > after) after = s.sequence;
        }
        pageToken = page.nextPageToken;
      } while (pageToken && !this.stopped);
      if (this.stopped) return;
      this.loaded.set(true);
      this.changed();
      for (const e of this.entries.values()) {
        if (e.summary.status !== "idle" && !e.summary.archived) this.refreshSoon(e.summary.id);
      }
      this.stopFollow = follow({
        threadId: "",
        after,
        onEvent: (ev) => this.onEvent(ev),
        onLive: (l) => this.live.set(l),
      });
    } catch (err) {
      if (signedOut(err)) session.set("expired");
      else this.error.set(describe(err));
    }
  }

  stop(): void {
    this.stopped = true;
    this.stopFollow?.();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    cancelAnimationFrame(this.frame);
  }

  private onEvent(ev: Event): void {
    const e = this.entries.get(ev.threadId);
    if (e) {
      e.activity = Math.max(e.activity, ms(ev.at));
      if (ev.payload.case === "requestOpened") e.pending++;
      this.changed();
    }
    // Text streaming in changes no summary; anything else may.
    if (ev.payload.case !== "messageDelta" && ev.payload.case !== "nodeDelta") this.refreshSoon(ev.threadId);
  }

  private refreshSoon(id: string): void {
    if (this.timers.has(id) || this.stopped) return;
    this.timers.set(
      id,
      setTimeout(() => {
        this.timers.delete(id);
        void this.refresh(id);
      }, refreshDelay),
    );
  }

  private async refresh(id: string): Promise<void> {
    try {
      const t = await api.getThread({ threadId: id, maxMessages: 1 });
      if (this.stopped || !t.summary) return;
      const before = this.entries.get(id);
      const e: Entry = {
        summary: t.summary,
        title: before?.title,
        group: t.worktree?.repository || t.summary.cwd,
        pending: pendingOf(t).length,
        wait: t.loop?.wait,
        activity: Math.max(before?.activity ?? 0, ms(t.summary.updatedAt)),
      };
      if (!e.title && t.page?.firstRun === 1 && t.runs[0]) e.title = shorten(t.runs[0].input);
      this.entries.set(id, e);
      if (before) this.announce(before, e);
      else this.requestTitle(id);
      this.changed();
    } catch (err) {
      if (signedOut(err)) session.set("expired");
    }
  }

  // announce raises a browser notification when a thread comes to need its
  // user or its newest run ends.
  private announce(before: Entry, after: Entry): void {
    const title = after.title || base(after.summary.cwd);
    const was = stateOf(before.summary, before.pending);
    const is = stateOf(after.summary, after.pending);
    if (is === "needs-you" && was !== "needs-you") {
      notify(`${title} needs you`, "A request waits for your answer.", after.summary.id, "request");
    } else if (before.summary.status !== "idle" && after.summary.status === "idle" && after.summary.lastRun) {
      notify(`${title}: run ${after.summary.lastRun}`, `Run ${after.summary.runs} ended.`, after.summary.id, "run");
    }
  }

  // requestTitle reads a thread's first run's input, once.
  requestTitle(id: string): void {
    if (this.titlesAsked.has(id)) return;
    this.titlesAsked.add(id);
    this.titleQueue.push(id);
    this.readTitles();
  }

  private readTitles(): void {
    while (this.titleCalls < titleReaders && this.titleQueue.length > 0 && !this.stopped) {
      const id = this.titleQueue.shift()!;
      this.titleCalls++;
      api
        .getThread({ threadId: id, fromRun: 1, toRun: 1, maxRuns: 1, maxMessages: 1 })
        .then(
          (t) => {
            const e = this.entries.get(id);
            if (!e) return;
            e.title = t.runs[0] ? shorten(t.runs[0].input) : "";
            if (t.worktree?.repository) e.group = t.worktree.repository;
            this.changed();
          },
          (err) => {
            if (signedOut(err)) session.set("expired");
          },
        )
        .finally(() => {
          this.titleCalls--;
          this.readTitles();
        });
    }
  }

  // changed re-renders the list once per frame, however many events came.
  private changed(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.version.set(this.version.get() + 1);
    });
  }
}

interface Filter {
  state: ThreadState | "";
  provider: string;
  text: string;
}

function matches(e: Entry, st: ThreadState, f: Filter): boolean {
  if (f.state && st !== f.state) return false;
  if (f.provider && e.summary.provider !== f.provider) return false;
  if (f.text) {
    const q = f.text.toLowerCase();
    const hay = [e.title ?? "", e.summary.cwd, e.summary.branch, e.summary.id, e.summary.model].join("\n").toLowerCase();
    if (!hay.includes(q)) return false;
  }
  return true;
}

export function ListPage() {
  const list = useMemo(() => new ThreadList(), []);
  useEffect(() => {
    void list.start();
    return () => list.stop();
  }, [list]);
  useCell(list.version);
  const loaded = useCell(list.loaded);
  const error = useCell(list.error);
  const live = useCell(list.live);
  const t = useCell(now);
  const [filter, setFilter] = useState<Filter>({ state: "", provider: "", text: "" });

  const all = [...list.entries.values()];
  const providers = [...new Set(all.map((e) => e.summary.provider))].sort();
  const counts = new Map<ThreadState, number>();
  const groups = new Map<string, { e: Entry; st: ThreadState }[]>();
  for (const e of all) {
    const st = stateOf(e.summary, e.pending);
    counts.set(st, (counts.get(st) ?? 0) + 1);
    if (!matches(e, st, filter)) continue;
    let g = groups.get(e.group);
    if (!g) groups.set(e.group, (g = []));
    g.push({ e, st });
  }
  const ordered = [...groups.entries()]
    .map(([group, rows]) => {
      rows.sort((a, b) => b.e.activity - a.e.activity);
      return { group, rows, newest: rows[0]?.e.activity ?? 0 };
    })
    .sort((a, b) => b.newest - a.newest);

  return (
    <main class="list">
      <div class="toolbar">
        <h1>Threads</h1>
        <Connection live={live} />
      </div>
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select
            value={filter.state}
            onChange={(e) => setFilter({ ...filter, state: (e.currentTarget as HTMLSelectElement).value as ThreadState | "" })}
          >
            <option value="">all ({all.length})</option>
            {threadStates.map((s) => (
              <option value={s}>
                {stateLabels[s]} ({counts.get(s) ?? 0})
              </option>
            ))}
          </select>
        </label>
        <label>
          Provider
          <select
            value={filter.provider}
            onChange={(e) => setFilter({ ...filter, provider: (e.currentTarget as HTMLSelectElement).value })}
          >
            <option value="">all</option>
            {providers.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
        <label class="grow">
          Search
          <input
            type="search"
            placeholder="title, directory, branch, id"
            value={filter.text}
            onInput={(e) => setFilter({ ...filter, text: (e.currentTarget as HTMLInputElement).value })}
          />
        </label>
      </form>
      {error && <p class="error" role="alert">Could not list the threads: {error}</p>}
      {!loaded && !error && <p class="muted">Loading threads…</p>}
      {loaded && all.length === 0 && (
        <p class="muted">No threads yet. Start one with <code>baton run</code>.</p>
      )}
      {loaded && all.length > 0 && ordered.length === 0 && <p class="muted">No thread matches the filters.</p>}
      {ordered.map(({ group, rows }) => (
        <section class="group" data-group={group} key={group} aria-label={group}>
          <h2 title={group}>
            {base(group)} <span class="muted path">{group}</span>
          </h2>
          <ul class="threads">
            {rows.map(({ e, st }) => (
              <ThreadRow key={e.summary.id} entry={e} state={st} now={t} list={list} />
            ))}
          </ul>
        </section>
      ))}
    </main>
  );
}

// One IntersectionObserver for every row: a row's title is read when it
// comes into view.
const seen = new WeakMap<Element, () => void>();
let observer: IntersectionObserver | undefined;

function observe(el: Element, onSeen: () => void): () => void {
  observer ??= new IntersectionObserver((entries) => {
    for (const en of entries) {
      if (!en.isIntersecting) continue;
      seen.get(en.target)?.();
      observer?.unobserve(en.target);
    }
  });
  seen.set(el, onSeen);
  observer.observe(el);
  return () => observer?.unobserve(el);
}

function ThreadRow({ entry, state, now, list }: { entry: Entry; state: ThreadState; now: number; list: ThreadList }) {
  const s = entry.summary;
  const ref = useRef<HTMLLIElement>(null);
  useEffect(() => {
    if (entry.title !== undefined || !ref.current) return;
    return observe(ref.current, () => list.requestTitle(s.id));
  }, [s.id, entry.title === undefined]);
  const title = entry.title || (entry.title === "" ? `(no runs) ${base(s.cwd)}` : s.id);
  return (
    <li class={`thread state-${state}`} data-thread-id={s.id} data-state={state} ref={ref}>
      <div class="row-main">
        <Link href={`/threads/${encodeURIComponent(s.id)}`} class="title">
          {title}
        </Link>
        <span class={`badge ${state}`}>{stateLabels[state]}</span>
      </div>
      <div class="row-meta muted">
        <span>
          {s.provider}
          {s.model && ` · ${s.model}`}
        </span>
        {s.branch && <span title="branch">⎇ {s.branch}</span>}
        <span>
          {s.runs} run{s.runs === 1 ? "" : "s"}
          {s.queued > 0 && ` (${s.queued} queued)`}
        </span>
        <time dateTime={iso(entry.activity)} title={iso(entry.activity)}>
          {ago(entry.activity, now)}
        </time>
      </div>
      {state === "waiting" && entry.wait && <WaitLine threadId={s.id} wait={entry.wait} />}
    </li>
  );
}

// WaitLine shows a usage-limit wait's countdown and a button that cancels
// it (an interrupt of the waiting run).
export function WaitLine({ threadId, wait }: { threadId: string; wait: Wait }) {
  const t = useSeconds();
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const at = ms(wait.at);
  const cancel = async () => {
    setBusy(true);
    try {
      await api.interrupt({ commandId: commandId(), threadId, runId: wait.runId });
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  const what = wait.limit?.description || "a limit";
  return (
    <div class="wait">
      <span>
        Waiting for {wait.provider} {what}: {wait.atReset ? "resets" : "probe"} in{" "}
        <time dateTime={iso(at)} data-role="countdown">
          {countdown(at, t)}
        </time>
        {wait.maxProbes > 0 && ` (wait ${wait.probe} of ${wait.maxProbes})`}
      </span>
      <button type="button" data-action="cancel-wait" onClick={cancel} disabled={busy}>
        Cancel wait
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </div>
  );
}
