// The composer: a message to the thread (SendMessage) in the modes its
// provider allows while a run is active, and an interrupt of that run.
import { useState } from "preact/hooks";
import type { Capabilities, Run, Thread } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { isActive } from "./threadmodel";
import { Alert } from "./alert";

// Composer sends a message: a new run on an idle thread; while a run is
// active, what the chosen mode says (the modes the provider allows).
export function Composer({ thread, active, caps }: { thread: Thread; active?: Run; caps?: Capabilities }) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const running = active !== undefined && isActive(active.status);
  const modes: { value: string; label: string }[] = [{ value: "", label: "the provider's default" }, { value: "queue", label: "queue after this run" }];
  if (caps?.nativeSteering) modes.push({ value: "steer", label: "steer this run" });
  if (caps?.interrupt !== false) modes.push({ value: "restart", label: "restart this run with it" });
  const send = async () => {
    if (!text.trim()) return;
    setBusy(true);
    setError("");
    try {
      await api.sendMessage({
        commandId: commandId(),
        threadId: thread.id,
        text,
        mode: running ? mode : "",
        targetRunId: running && (mode === "steer" || mode === "restart") ? active!.id : "",
      });
      setText("");
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  const interrupt = async () => {
    setError("");
    try {
      await api.interrupt({ commandId: commandId(), threadId: thread.id, runId: active?.id ?? "" });
    } catch (err) {
      setError(describe(err));
    }
  };
  if (thread.archived) return <p class="muted">This thread is archived: it takes no more messages.</p>;
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <label class="sr-only" for="composer">
        Message
      </label>
      <textarea
        id="composer"
        data-role="composer"
        placeholder={running ? "Message the running agent…" : "Message the agent…"}
        value={text}
        onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <div class="row">
        <button type="submit" class="primary" data-action="send" disabled={busy || !text.trim()}>
          Send
        </button>
        {running && (
          <label>
            <span class="muted">While run {active!.ordinal} is {active!.status}: </span>
            <select value={mode} aria-label="How the message joins the active run" onChange={(e) => setMode((e.currentTarget as HTMLSelectElement).value)}>
              {modes.map((m) => (
                <option value={m.value}>{m.label}</option>
              ))}
            </select>
          </label>
        )}
        <button type="button" data-action="interrupt" disabled={!running || caps?.interrupt === false} onClick={() => void interrupt()}>
          Interrupt
        </button>
        <span class="muted">Ctrl+Enter sends</span>
      </div>
      <Alert error={error} />
    </form>
  );
}
