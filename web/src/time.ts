// Times as the page shows them.
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";

export function ms(t: Timestamp | undefined): number {
  return t ? timestampMs(t) : 0;
}

// ago says how long before now an instant was: "just now", "3 min ago".
export function ago(at: number, now: number): string {
  if (!at) return "never";
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 45) return "just now";
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 24) return `${h} h ago`;
  const d = Math.round(h / 24);
  if (d < 45) return `${d} d ago`;
  return new Date(at).toLocaleDateString();
}

// countdown says how long until an instant: "4:05", "2 h 10 min".
export function countdown(at: number, now: number): string {
  const s = Math.max(0, Math.round((at - now) / 1000));
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// clock is an instant as HH:MM in the local zone.
export function clock(at: number): string {
  const d = new Date(at);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

// iso is an instant for a title attribute.
export function iso(at: number): string {
  return at ? new Date(at).toISOString() : "";
}
