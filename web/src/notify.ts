// Browser notifications, opt in: the page asks for permission only when
// the user clicks to turn them on, and raises one when a thread comes to
// need its user or a run ends.
import { Cell } from "./store";

const key = "baton.notifications";

export const notifying = new Cell(
  typeof Notification !== "undefined" && Notification.permission === "granted" && localStorage.getItem(key) === "on",
);

export const notificationsSupported = typeof Notification !== "undefined";

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
