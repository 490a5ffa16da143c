// The states a user acts on, derived from what the API says of a thread:
// never a state the log lacks.
import type { HostLost, Plugin, Run, RuntimeRequest, Thread, ThreadSummary } from "./gen/baton_pb";
import { api } from "./api";
import { clock, ms } from "./time";

export type ThreadState = "working" | "needs-you" | "waiting" | "failed" | "done" | "archived" | "host-lost";

export const threadStates: ThreadState[] = ["needs-you", "working", "waiting", "failed", "host-lost", "done", "archived"];

export const stateLabels: Record<ThreadState, string> = {
  "needs-you": "needs you",
  working: "working",
  waiting: "waiting",
  failed: "failed",
  done: "done",
  archived: "archived",
  "host-lost": "host lost",
};

// Run statuses that end a run badly: the user has something to look at.
const failedRuns = new Set(["failed", "blocked"]);

// stateOf is a thread's state: archived, then its host lost (nothing runs
// it until a host claims it), then a pending request (needs you), then the
// active run's status (waiting on an armed wait, else working: a run waits
// for a request's answer too), then how its newest run ended.
export function stateOf(s: ThreadSummary, pendingRequests: number): ThreadState {
  if (s.archived) return "archived";
  if (s.hostLost) return "host-lost";
  if (pendingRequests > 0) return "needs-you";
  if (s.status === "waiting" && s.wait) return "waiting";
  if (s.status !== "idle" && s.status !== "") return "working";
  if (s.queued > 0) return "working";
  if (failedRuns.has(s.lastRun)) return "failed";
  return "done";
}

// stateOfThread is stateOf for a thread page's projection, whose runs the
// page keeps current from the events (its summary is as it was read).
export function stateOfThread(t: Thread, runs: Run[]): ThreadState {
  let status = "idle";
  let lastRun = "";
  let queued = 0;
  for (let i = runs.length - 1; i >= 0; i--) {
    const r = runs[i]!;
    if (!r.startedAt) {
      if (r.status === "queued") queued++;
      continue;
    }
    lastRun = r.status;
    if (r.status === "starting" || r.status === "running" || r.status === "waiting") status = r.status;
    break;
  }
  const wait = t.loop?.wait;
  return stateOf(
    { archived: t.archived, hostLost: t.hostLost, status, lastRun, queued, wait } as ThreadSummary,
    pendingOf(t).length,
  );
}

// hostLostLine says when a thread's host lost its lease (HH:MM, local
// time) and what becomes of the thread: another host takes it over when
// its cwd is shared; otherwise it waits for its host, where its cwd is.
export function hostLostLine(l: HostLost, sharedCwd: boolean): string {
  const next = sharedCwd ? "another host takes it over" : `the thread's cwd is on ${l.host}`;
  return `host ${l.host} lost its lease at ${clock(ms(l.at))}; ${next}`;
}

export function pendingOf(t: Thread): RuntimeRequest[] {
  return t.requests.filter((r) => r.status === "pending");
}

// Terminal run statuses.
const ended = new Set(["completed", "interrupted", "failed", "cancelled", "rolled_back", "blocked"]);

export function runEnded(r: Run): boolean {
  return ended.has(r.status);
}

// shorten cuts a text to its first line, at most n characters.
export function shorten(text: string, n = 80): string {
  const line = text.trim().split("\n", 1)[0] ?? "";
  return line.length > n ? line.slice(0, n - 1) + "…" : line;
}

// base is a path's last element.
export function base(path: string): string {
  const parts = path.split("/").filter(Boolean);
  return parts[parts.length - 1] ?? path;
}

// The installed plugins, asked for once a page load.
let plugins: Promise<Plugin[]> | undefined;

export function listPlugins(): Promise<Plugin[]> {
  plugins ??= api.listPlugins({}).then(
    (r) => r.plugins,
    (err) => {
      plugins = undefined;
      throw err;
    },
  );
  return plugins;
}
