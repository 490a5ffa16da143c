// The dashboard's entry: the header (navigation, notifications, sign
// out), then the page the path names, or the signed-out page once the
// session is gone.
import { render } from "preact";
import { useState } from "preact/hooks";
import "./app.css";
import { Link, parse, path } from "./router";
import { session, useCell } from "./store";
import { ListPage } from "./list";
import { ThreadPage } from "./thread";
import { PluginsPage } from "./plugins";
import { blocked, notificationsSupported, notifying, toggleNotifications } from "./notify";
import { Alert } from "./alert";

function App() {
  const p = useCell(path);
  const s = useCell(session);
  if (s !== "in") return <SignedOut why={s} />;
  const route = parse(p);
  return (
    <>
      <Header />
      {route.page === "list" && <ListPage />}
      {route.page === "thread" && <ThreadPage key={route.id} id={route.id} />}
      {route.page === "plugins" && <PluginsPage />}
      {route.page === "missing" && (
        <main>
          <h1>Not found</h1>
          <p>
            No page at <code>{p}</code>. <Link href="/">See the threads.</Link>
          </p>
        </main>
      )}
    </>
  );
}

function Header() {
  const on = useCell(notifying);
  const refused = useCell(blocked);
  const [error, setError] = useState("");
  const signOut = async () => {
    try {
      const r = await fetch("/logout", { method: "POST", credentials: "same-origin" });
      if (!r.ok && r.status !== 401) throw new Error(`sign out: ${r.status} ${r.statusText}`);
      session.set("out");
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <header class="top">
      <nav aria-label="Main">
        <Link href="/" class="brand">
          Baton
        </Link>
        <Link href="/">Threads</Link>
        <Link href="/plugins">Plugins</Link>
      </nav>
      <div class="actions">
        {notificationsSupported() && !refused && (
          <button type="button" data-action="notifications" aria-pressed={on} onClick={() => void toggleNotifications()}>
            {on ? "Notifications on" : "Notify me"}
          </button>
        )}
        {refused && <span class="muted">This browser blocks notifications from this page.</span>}
        <button type="button" data-action="sign-out" onClick={() => void signOut()}>
          Sign out
        </button>
        <Alert error={error} inline />
      </div>
    </header>
  );
}

function SignedOut({ why }: { why: "expired" | "out" }) {
  return (
    <main class="signed-out" data-role="signed-out">
      <h1>{why === "out" ? "Signed out" : "Not signed in"}</h1>
      <p>
        {why === "out" ? "You have signed out of Baton." : "This page's session has ended, or it never had one."} To sign
        in, run <code>baton ui</code> on the machine that runs the service and open the address it prints.
      </p>
    </main>
  );
}

render(<App />, document.getElementById("app")!);
