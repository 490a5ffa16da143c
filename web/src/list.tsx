// The thread list at /: every thread, grouped by repository (or cwd),
// live from one Subscribe of every thread.
//
// The list starts from ListThreads (every page), subscribes after the
// newest sequence those summaries show, and, on an event, re-reads that
// thread's summary (GetThread with one message) after a short delay, so
// that a burst of events costs one call. A summary says the thread's
// title, its pending requests, its armed wait and, for a worktree thread,
// the repository it was made from (its group); the title of a thread whose
// summary has none (one a service before titles listed) is read once from
// its projection.
import { Component } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Event, ThreadSummary } from "./gen/baton_pb";
import { api, describe, signedOut } from "./api";
import { follow } from "./stream";
import { Cell, now, session, useCell } from "./store";
import { type ThreadState, base, shorten, stateLabels, stateOf, threadStates } from "./state";
import { ago, iso, ms } from "./time";
import { Link } from "./router";
import { Connection } from "./connection";
import { notify, waitBody } from "./notify";
import { WaitLine } from "./wait";

// Entry is what the list holds of one thread. It is replaced when it
// changes, never changed in place (but for the activity of streamed text).
interface Entry {
  summary: ThreadSummary;
  // group is the repository a worktree thread was made from, else its cwd.
  group: string;
  // pending counts its pending requests: the summary's, and those opened
  // since it was read.
  pending: number;
  activity: number;
}

// refreshDelay is how long a thread's events are gathered before its
// summary is read again.
const refreshDelay = 250;
// readers bounds the reads of details in flight.
const readers = 4;

function entryOf(s: ThreadSummary, group = s.repository || s.cwd): Entry {
  return { summary: s, group, pending: s.pending, activity: ms(s.updatedAt) };
}

class ThreadList {
  readonly entries = new Map<string, Entry>();
  readonly version = new Cell(0);
  readonly live = new Cell(false);
  readonly loaded = new Cell(false);
  readonly error = new Cell("");
  private timers = new Map<string, ReturnType<typeof setTimeout>>();
  private detailQueue: string[] = [];
  private detailsAsked = new Set<string>();
  private detailCalls = 0;
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
          this.entries.set(s.id, entryOf(s));
          if (s.sequence > after) after = s.sequence;
          if (!s.title && s.runs > 0) this.requestDetails(s.id);
        }
        pageToken = page.nextPageToken;
      } while (pageToken && !this.stopped);
      if (this.stopped) return;
      this.loaded.set(true);
      this.changed();
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
    // Text streaming in changes no summary, and its activity shows at the
    // next tick of the clock; anything else may change the row now.
    const streaming = ev.payload.case === "messageDelta" || ev.payload.case === "nodeDelta";
    if (e && streaming) {
      e.activity = Math.max(e.activity, ms(ev.at));
      return;
    }
    if (e) {
      const pending = e.pending + (ev.payload.case === "requestOpened" ? 1 : 0);
      this.entries.set(ev.threadId, { ...e, pending, activity: Math.max(e.activity, ms(ev.at)) });
      this.changed();
    }
    this.refreshSoon(ev.threadId);
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
      const e = entryOf(t.summary);
      e.activity = Math.max(before?.activity ?? 0, e.activity);
      this.entries.set(id, e);
      if (before) this.announce(before, e);
      this.changed();
    } catch (err) {
      if (signedOut(err)) session.set("expired");
    }
  }

  // announce raises a browser notification when a thread comes to need its
  // user or its newest run ends.
  private announce(before: Entry, after: Entry): void {
    const s = after.summary;
    const title = s.title || base(s.cwd);
    // Announced from the summaries as read, not from the rows' pending
    // counts: a request opened since the last read shows on the row at
    // once, and is announced once the summary, with the thread's title,
    // is read again.
    const was = stateOf(before.summary, before.summary.pending);
    const is = stateOf(s, s.pending);
    if (is === "needs-you" && was !== "needs-you") {
      notify(`${title} needs you`, "A request waits for your answer.", s.id, "request");
    } else if (is === "waiting" && was !== "waiting") {
      notify(`${title} waits`, waitBody(s.wait?.provider ?? "", s.wait?.at), s.id, "wait");
    } else if (was === "waiting" && is !== "waiting") {
      notify(`${title}: the wait ended`, "The run goes on.", s.id, "wait");
    } else if (s.status === "idle" && s.lastRun && (before.summary.status !== "idle" || before.summary.runs !== s.runs)) {
      // Ended since the row was read: it was active then, or the whole
      // run came and went between two reads (the count of runs moved).
      notify(`${title}: run ${s.lastRun}`, `Run ${s.runs} ended.`, s.id, "run");
    }
  }

  // requestDetails reads, once, the title of a thread whose summary has
  // none.
  private requestDetails(id: string): void {
    if (this.detailsAsked.has(id)) return;
    this.detailsAsked.add(id);
    this.detailQueue.push(id);
    this.readDetails();
  }

  private readDetails(): void {
    while (this.detailCalls < readers && this.detailQueue.length > 0 && !this.stopped) {
      const id = this.detailQueue.shift()!;
      this.detailCalls++;
      api
        .getThread({ threadId: id, fromRun: 1, toRun: 1, maxRuns: 1, maxMessages: 1 })
        .then(
          (t) => {
            const e = this.entries.get(id);
            if (!e) return;
            const title = e.summary.title || t.title || shorten(t.runs[0]?.input ?? "");
            if (title === e.summary.title) return;
            this.entries.set(id, { ...e, summary: { ...e.summary, title } });
            this.changed();
          },
          (err) => {
            if (signedOut(err)) session.set("expired");
          },
        )
        .finally(() => {
          this.detailCalls--;
          this.readDetails();
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
    const hay = [e.summary.title, e.summary.cwd, e.summary.branch, e.summary.id, e.summary.model].join("\n").toLowerCase();
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
  useEffect(() => {
    if (loaded) performance.mark("baton:threads-shown");
  }, [loaded]);

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
  const needing = counts.get("needs-you") ?? 0;
  useEffect(() => {
    document.title = needing > 0 ? `(${needing}) Threads · Baton` : "Threads · Baton";
  }, [needing]);
  const ordered = [...groups.entries()]
    .map(([group, rows]) => {
      rows.sort((a, b) => b.e.activity - a.e.activity);
      return { group, rows, newest: rows[0]?.e.activity ?? 0 };
    })
    .sort((a, b) => b.newest - a.newest);

  return (
    <main class="list" data-loaded={String(loaded)}>
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
              <ThreadRow key={e.summary.id} entry={e} state={st} now={t} />
            ))}
          </ul>
        </section>
      ))}
    </main>
  );
}

interface RowProps {
  entry: Entry;
  state: ThreadState;
  now: number;
}

// ThreadRow renders again only when its entry, its state or the clock
// changed: a list of many threads costs the changed rows per event.
class ThreadRow extends Component<RowProps> {
  shouldComponentUpdate(next: RowProps): boolean {
    const p = this.props;
    return next.entry !== p.entry || next.state !== p.state || next.now !== p.now;
  }
  render({ entry, state, now }: RowProps) {
    const s = entry.summary;
    const title = s.title || (s.runs === 0 ? `(no messages) ${base(s.cwd)}` : s.id);
    return (
      <li class={`thread state-${state}`} data-thread-id={s.id} data-state={state}>
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
          {s.host && <span title="the host that owns it: its runs run there">on {s.host}</span>}
          {s.branch && (
            <span title={s.worktree ? `worktree ${s.worktree}` : "branch"}>
              ⎇ {s.branch}
              {s.worktree && ` · ${base(s.worktree)}`}
            </span>
          )}
          <span>
            {s.runs} run{s.runs === 1 ? "" : "s"}
            {s.queued > 0 && ` (${s.queued} queued)`}
          </span>
          <time dateTime={iso(entry.activity)} title={iso(entry.activity)}>
            {ago(entry.activity, now)}
          </time>
        </div>
        {state === "waiting" && s.wait?.at && (
          <WaitLine threadId={s.id} at={s.wait.at} provider={s.wait.provider} what="limit" runId={s.wait.runId} />
        )}
      </li>
    );
  }
}
