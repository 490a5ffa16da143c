// The thread page's two panels: its unattended policy (what the loop has
// used, its armed wait, its last check; SetPolicy) and its provider
// (SwitchProvider, and the handoffs a switch gave).
import { create } from "@bufbuild/protobuf";
import { type Duration, durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import { useEffect, useState } from "preact/hooks";
import { type ContinuationPolicy, ContinuationPolicySchema, type Plugin, type Thread } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { listPlugins } from "./state";
import { WaitLine } from "./wait";
import { iso, ms } from "./time";
import { Alert } from "./alert";

function minutes(d: Duration | undefined): string {
  if (!d) return "";
  const m = durationMs(d) / 60_000;
  return m >= 60 && m % 60 === 0 ? `${m / 60} h` : `${Math.round(m * 10) / 10} min`;
}

// policyWords says a policy in a line: "on a limit: wait · until make
// test · at most 10 runs".
function policyWords(p: ContinuationPolicy | undefined): string {
  if (!p) return "off";
  const parts: string[] = [];
  if (p.onLimit === "wait") parts.push("on a limit: wait for its reset");
  if (p.onLimit === "switch") parts.push(`on a limit: switch to ${p.switchTo}${p.switchModel ? ` (${p.switchModel})` : ""}${p.return ? ", and return" : ""}`);
  if (p.until) parts.push(`until ${p.until} passes`);
  if (p.maxRuns) parts.push(`at most ${p.maxRuns} runs`);
  if (p.maxDuration) parts.push(`at most ${minutes(p.maxDuration)}`);
  if (p.maxTokens) parts.push(`at most ${p.maxTokens} tokens`);
  return parts.length ? parts.join(" · ") : "off";
}

export function PolicyPanel({ thread }: { thread: Thread }) {
  const loop = thread.loop;
  const policy = loop?.policy;
  const [onLimit, setOnLimit] = useState(policy?.onLimit ?? "");
  const [switchTo, setSwitchTo] = useState(policy?.switchTo ?? "");
  const [until, setUntil] = useState(policy?.until ?? "");
  const [maxRuns, setMaxRuns] = useState(policy?.maxRuns ? String(policy.maxRuns) : "");
  const [maxMinutes, setMaxMinutes] = useState(policy?.maxDuration ? String(durationMs(policy.maxDuration) / 60_000) : "");
  const [maxTokens, setMaxTokens] = useState(policy?.maxTokens ? String(policy.maxTokens) : "");
  const [plugins, setPlugins] = useState<Plugin[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => {
    listPlugins().then(setPlugins, () => setPlugins([]));
  }, []);
  const set = async (p: ContinuationPolicy | undefined) => {
    setBusy(true);
    setError("");
    try {
      await api.setPolicy({ commandId: commandId(), threadId: thread.id, policy: p });
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  const submit = (e: SubmitEvent) => {
    e.preventDefault();
    const p = create(ContinuationPolicySchema, {
      onLimit,
      switchTo: onLimit === "switch" ? switchTo : "",
      until: until.trim(),
      maxRuns: Number(maxRuns) || 0,
      maxTokens: BigInt(Math.max(0, Math.floor(Number(maxTokens) || 0))),
    });
    const m = Number(maxMinutes);
    if (m > 0) p.maxDuration = durationFromMs(m * 60_000);
    void set(p);
  };
  return (
    <details class="panel" data-role="policy">
      <summary>
        Unattended: <span class="muted">{policyWords(policy)}</span>
        {loop?.status && <span class="muted"> · loop {loop.status}</span>}
      </summary>
      {loop && (
        <dl class="facts">
          <dt class="sr-only">Loop</dt>
          <dd>
            loop {loop.status || "—"}
            {loop.reason && `: ${loop.reason}`}
          </dd>
          <dd>
            {loop.runs} run{loop.runs === 1 ? "" : "s"}
            {policy?.maxRuns ? ` of ${policy.maxRuns}` : ""}
          </dd>
          <dd>
            {String(loop.tokens)} tokens{policy?.maxTokens ? ` of ${policy.maxTokens}` : ""}
          </dd>
          {loop.since && <dd>since {new Date(ms(loop.since)).toLocaleString()}</dd>}
          {loop.checkPending && <dd>a check is running</dd>}
        </dl>
      )}
      {loop?.wait?.at && (
        <WaitLine
          threadId={thread.id}
          at={loop.wait.at}
          provider={loop.wait.provider}
          what={loop.wait.limit?.description || "limit"}
          runId={loop.wait.runId}
          note={`(${loop.wait.atReset ? "at its reset" : "a probe"}${loop.wait.maxProbes ? `, wait ${loop.wait.probe} of ${loop.wait.maxProbes}` : ""})`}
        />
      )}
      {loop?.return && (
        <p class="muted">
          Returns to {loop.return.provider} at <time dateTime={iso(ms(loop.return.at))}>{new Date(ms(loop.return.at)).toLocaleString()}</time>
        </p>
      )}
      {loop?.check && (
        <div>
          Last check <code>{loop.check.command}</code>: {loop.check.passed ? "passed" : `exit ${loop.check.exitCode}`}
          {loop.check.timedOut && " (timed out)"}
          {loop.check.output && <pre>{loop.check.output}</pre>}
        </div>
      )}
      <form class="form-grid" onSubmit={submit} aria-label="Set the unattended policy">
        <label>
          On a provider limit
          <select value={onLimit} onChange={(e) => setOnLimit((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">end the run blocked</option>
            <option value="wait">wait for the reset</option>
            <option value="switch">switch provider</option>
          </select>
        </label>
        {onLimit === "switch" && (
          <label>
            Switch to
            <select value={switchTo} onChange={(e) => setSwitchTo((e.currentTarget as HTMLSelectElement).value)}>
              <option value="">choose…</option>
              {plugins.map((p) => (
                <option value={p.name}>{p.name}</option>
              ))}
            </select>
          </label>
        )}
        <label>
          Until (a check command)
          <input value={until} placeholder="make test" onInput={(e) => setUntil((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label>
          At most runs
          <input type="number" min="0" value={maxRuns} onInput={(e) => setMaxRuns((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label>
          At most minutes
          <input type="number" min="0" value={maxMinutes} onInput={(e) => setMaxMinutes((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label>
          At most tokens
          <input type="number" min="0" value={maxTokens} onInput={(e) => setMaxTokens((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <div class="row">
          <button type="submit" data-action="set-policy" disabled={busy}>
            Set policy
          </button>{" "}
          <button type="button" data-action="policy-off" disabled={busy || !policy} onClick={() => void set(undefined)}>
            Turn off
          </button>
        </div>
      </form>
      <Alert error={error} />
    </details>
  );
}

export function ProviderPanel({ thread }: { thread: Thread }) {
  const [plugins, setPlugins] = useState<Plugin[]>([]);
  const [provider, setProvider] = useState(thread.provider);
  const [model, setModel] = useState("");
  const [command, setCommand] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => {
    listPlugins().then(setPlugins, () => setPlugins([]));
  }, []);
  const used = new Set(thread.providerBindings.map((b) => b.provider));
  const submit = async (e: SubmitEvent) => {
    e.preventDefault();
    setBusy(true);
    setError("");
    try {
      const argv = command.trim() ? command.trim().split(/\s+/) : [];
      await api.switchProvider({
        commandId: commandId(),
        threadId: thread.id,
        provider,
        model: model.trim(),
        providerCommand: argv.length ? { argv, env: [] } : undefined,
      });
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  const handoffs = [...thread.handoffs].reverse();
  return (
    <details class="panel" data-role="provider">
      <summary>
        Provider: <span class="muted">{thread.provider}{thread.model && ` · ${thread.model}`}</span>
        {handoffs.length > 0 && <span class="muted"> · {handoffs.length} handoff{handoffs.length === 1 ? "" : "s"}</span>}
      </summary>
      <form class="form-grid" onSubmit={(e) => void submit(e)} aria-label="Switch provider">
        <label>
          Provider
          <select value={provider} onChange={(e) => setProvider((e.currentTarget as HTMLSelectElement).value)}>
            {plugins.length === 0 && <option value={thread.provider}>{thread.provider}</option>}
            {plugins.map((p) => (
              <option value={p.name}>
                {p.name}
                {used.has(p.name) ? " (used)" : ""}
              </option>
            ))}
          </select>
        </label>
        <label>
          Model
          <input value={model} placeholder="the provider's default" onInput={(e) => setModel((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label>
          Provider command
          <input
            value={command}
            placeholder={used.has(provider) ? "as before" : "required for a new provider"}
            onInput={(e) => setCommand((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <div class="row">
          <button type="submit" data-action="switch-provider" disabled={busy || !provider}>
            Switch
          </button>
        </div>
      </form>
      <Alert error={error} />
      {handoffs.map((h) => (
        <details class="handoff" data-handoff-id={h.id}>
          <summary>
            Handoff {h.fromProvider} → {h.toProvider} ({h.strategy.replaceAll("_", " ")}, runs {h.fromRun}–{h.toRun},{" "}
            {h.bytes} bytes{h.truncated ? ", shortened" : ""}) <span class="muted">{h.status}</span>
          </summary>
          <pre>{h.text}</pre>
        </details>
      ))}
    </details>
  );
}
