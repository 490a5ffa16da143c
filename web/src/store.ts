// A value the page shares between components, and the hook that re-renders
// a component when it changes. Small on purpose: the page's state is the
// API's snapshot plus the events after it, held in plain objects.
import { useEffect, useState } from "preact/hooks";

export class Cell<T> {
  private listeners = new Set<(v: T) => void>();
  constructor(private current: T) {}

  get(): T {
    return this.current;
  }

  set(v: T): void {
    if (Object.is(v, this.current)) return;
    this.current = v;
    for (const l of [...this.listeners]) l(v);
  }

  subscribe(l: (v: T) => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

// useCell re-renders the calling component whenever the cell changes.
export function useCell<T>(c: Cell<T>): T {
  const [, setTick] = useState(0);
  useEffect(() => c.subscribe(() => setTick((n) => n + 1)), [c]);
  return c.get();
}

// The session: false once a call said the page is not signed in, or the
// user signed out ("out").
export const session = new Cell<"in" | "expired" | "out">("in");

// now ticks every 15 seconds, for relative times and countdowns.
export const now = new Cell(Date.now());
setInterval(() => now.set(Date.now()), 15_000);

// seconds ticks every second, only while something shows a countdown.
export const seconds = new Cell(Date.now());
let countdowns = 0;
let secondTimer: ReturnType<typeof setInterval> | undefined;

// useSeconds re-renders the caller every second while it is mounted.
export function useSeconds(): number {
  useEffect(() => {
    if (countdowns++ === 0) secondTimer = setInterval(() => seconds.set(Date.now()), 1000);
    return () => {
      if (--countdowns === 0) clearInterval(secondTimer);
    };
  }, []);
  return useCell(seconds);
}
