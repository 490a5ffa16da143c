// follow keeps one Subscribe stream open: of one thread, or of every
// thread (threadId ""). When the stream ends (the service restarted, the
// network dropped, the subscriber fell behind) it subscribes again after
// the last sequence it handed on, waiting longer each time it fails in a
// row. The caller owns it: the returned function stops it for good.
import type { Event } from "./gen/baton_pb";
import { api, signedOut } from "./api";
import { session } from "./store";

export interface Follow {
  threadId: string;
  after: bigint;
  onEvent(e: Event): void;
  onLive(live: boolean): void;
}

const firstDelay = 500;
const maxDelay = 15_000;

export function follow(f: Follow): () => void {
  const stop = new AbortController();
  void run(f, stop.signal);
  return () => stop.abort();
}

async function run(f: Follow, signal: AbortSignal): Promise<void> {
  let after = f.after;
  let delay = firstDelay;
  while (!signal.aborted) {
    try {
      const call = new AbortController();
      const stopCall = () => call.abort();
      signal.addEventListener("abort", stopCall, { once: true });
      let ended = false;
      const events = api.subscribe(
        { threadId: f.threadId, afterSequence: after },
        { signal: call.signal, onHeader: () => f.onLive(true) },
      );
      // The transcoder sends the stream's headers with its first event, so
      // a quiet stream says nothing: once the service has answered a call
      // made after it, and the stream has not ended, it is open. (Nothing
      // can be missed either way: the stream starts from a sequence.)
      void api.getStatus({}, { signal: call.signal }).then(
        () => {
          if (!ended && !call.signal.aborted) f.onLive(true);
        },
        () => {},
      );
      try {
        for await (const e of events) {
          if (e.sequence <= after) continue;
          after = e.sequence;
          delay = firstDelay;
          f.onEvent(e);
        }
      } finally {
        ended = true;
        signal.removeEventListener("abort", stopCall);
      }
    } catch (err) {
      if (signal.aborted) return;
      if (signedOut(err)) {
        f.onLive(false);
        session.set("expired");
        return;
      }
    }
    f.onLive(false);
    await sleep(delay, signal);
    delay = Math.min(delay * 2, maxDelay);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
