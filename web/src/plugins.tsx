// The plugins page at /plugins: every installed provider plugin, its
// version, what it can do, and whether its binary is the one its
// directory's lockfile records (verification).
import { useEffect, useState } from "preact/hooks";
import type { Capabilities, Plugin } from "./gen/baton_pb";
import { describe, signedOut } from "./api";
import { listPlugins } from "./state";
import { session } from "./store";

const capabilityNames: [keyof Capabilities & string, string][] = [
  ["nativeSteering", "native steering"],
  ["interrupt", "interrupt"],
  ["approvals", "approvals"],
  ["subagents", "subagents"],
  ["nativeRollback", "native rollback"],
  ["fork", "fork"],
  ["resume", "resume"],
  ["threadSnapshot", "thread snapshot"],
];

export function PluginsPage() {
  const [plugins, setPlugins] = useState<Plugin[] | undefined>();
  const [error, setError] = useState("");
  useEffect(() => {
    document.title = "Plugins · Baton";
    listPlugins().then(setPlugins, (err) => {
      if (signedOut(err)) session.set("expired");
      else setError(describe(err));
    });
  }, []);
  return (
    <main class="plugins">
      <h1>Plugins</h1>
      {error && <p class="error" role="alert">Could not list the plugins: {error}</p>}
      {!plugins && !error && <p class="muted">Loading plugins…</p>}
      {plugins?.length === 0 && <p class="muted">No plugins are installed.</p>}
      <ul class="cards">
        {plugins?.map((p) => (
          <li class="card" data-plugin={p.name} key={p.name}>
            <h2>
              {p.name} <span class="muted">{p.version || "version unknown"}</span>
            </h2>
            <dl>
              <dt>Wire protocol</dt>
              <dd>{p.wireProtocol || "—"}</dd>
              <dt>Binary</dt>
              <dd>
                <code>{p.path || "—"}</code>
              </dd>
              <dt>Verification</dt>
              <dd data-role="verification" data-verification={p.verification || "unknown"}>
                {p.verification || "not said"}
                {p.verificationDetail && `: ${p.verificationDetail}`}
              </dd>
              {p.notes["error"] && (
                <>
                  <dt>Start</dt>
                  <dd class="error" data-role="start-error">
                    failed: {p.notes["error"]}
                  </dd>
                </>
              )}
              {Object.entries(p.notes)
                .filter(([k]) => k !== "error")
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([k, v]) => (
                  <>
                    <dt>{k}</dt>
                    <dd data-note={k}>{v}</dd>
                  </>
                ))}
            </dl>
            <ul class="caps" aria-label={`${p.name} capabilities`}>
              {capabilityNames.map(([key, label]) => {
                const on = Boolean(p.capabilities?.[key]);
                return (
                  <li class={on ? "on" : "off"} data-capability={key} data-on={String(on)}>
                    <span aria-hidden="true">{on ? "✓" : "✗"}</span> {label}
                    <span class="sr-only">{on ? ": yes" : ": no"}</span>
                  </li>
                );
              })}
            </ul>
          </li>
        ))}
      </ul>
    </main>
  );
}
