// Browser notifications, opt in: the page asks for permission only when
// the user clicks to turn them on, and raises one when a thread comes to
// need its user, a run ends, or a usage-limit wait begins or ends (the
// events the webhooks send).
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { Cell } from "./store";
import { clock, ms } from "./time";

const key = "baton.notifications";

export const notifying = new Cell(
  typeof Notification !== "undefined" && Notification.permission === "granted" && localStorage.getItem(key) === "on",
);

export function notificationsSupported(): boolean {
  return typeof Notification !== "undefined";
}

// blocked says the browser refused notifications (the user, or its
// settings): the page says so rather than asking again.
export const blocked = new Cell(notificationsSupported() && Notification.permission === "denied");

// toggleNotifications turns notifications on (asking the browser) or off.
export async function toggleNotifications(): Promise<void> {
  if (notifying.get()) {
    localStorage.setItem(key, "off");
    notifying.set(false);
    return;
  }
  const answer = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
  const on = answer === "granted";
  localStorage.setItem(key, on ? "on" : "off");
  notifying.set(on);
  blocked.set(answer === "denied");
}

// notify raises a notification that opens the thread when clicked; tag
// keeps one per thread and event.
export function notify(title: string, body: string, threadId: string, tag: string): void {
  if (!notifying.get() || document.hasFocus()) return;
  const n = new Notification(title, { body, tag: `${threadId}:${tag}` });
  n.onclick = () => {
    focus();
    location.assign(`/threads/${encodeURIComponent(threadId)}`);
  };
}

// waitBody says what a usage-limit wait waits for: the provider's limit,
// and until when when it is known.
export function waitBody(provider: string, until: Timestamp | undefined): string {
  const who = provider ? `${provider}'s usage limit` : "a usage limit";
  if (!until) return `The run waits for ${who} to reset.`;
  return `The run waits for ${who} to reset, at ${clock(ms(until))}.`;
}
