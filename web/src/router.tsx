// Client-side routes: /, /threads/ID and /plugins. The service answers
// every such path with index.html; the page reads the path and follows
// links without reloading.
import type { ComponentChildren } from "preact";
import { Cell } from "./store";

export const path = new Cell(location.pathname);

addEventListener("popstate", () => path.set(location.pathname));

export function navigate(to: string): void {
  if (to === location.pathname) return;
  history.pushState(null, "", to);
  path.set(location.pathname);
  scrollTo(0, 0);
}

// Link is an anchor the router follows (a modified click opens a tab, as
// the browser would).
export function Link(props: { href: string; class?: string; children: ComponentChildren; "aria-label"?: string }) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(props.href);
  };
  return (
    <a href={props.href} class={props.class} onClick={onClick} aria-label={props["aria-label"]}>
      {props.children}
    </a>
  );
}

export type Route = { page: "list" } | { page: "thread"; id: string } | { page: "plugins" } | { page: "missing" };

export function parse(p: string): Route {
  if (p === "/" || p === "") return { page: "list" };
  if (p === "/plugins" || p === "/plugins/") return { page: "plugins" };
  const m = /^\/threads\/([^/]+)\/?$/.exec(p);
  if (m?.[1]) return { page: "thread", id: decodeURIComponent(m[1]) };
  return { page: "missing" };
}
