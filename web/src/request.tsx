// A provider's request (an approval or question) on the thread page: the
// choices it offers while it is pending (AnswerRequest), how it was
// answered once it is not.
import { useState } from "preact/hooks";
import type { RuntimeRequest } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { Alert } from "./alert";

// decisionOf is the answer a provider's option stands for.
const decisionOf: Record<string, string> = {
  allow_once: "accept",
  allow_always: "accept_for_session",
  reject_once: "decline",
  reject_always: "decline",
};

const decisionLabels: Record<string, string> = {
  accept: "Accept",
  accept_for_session: "Accept for the session",
  decline: "Decline",
  cancel: "Cancel the turn",
};

// choicesOf are the buttons a request shows: the provider's options (one
// per decision, in its order, with its words), then cancel.
function choicesOf(q: RuntimeRequest): { decision: string; label: string }[] {
  const out: { decision: string; label: string }[] = [];
  const seen = new Set<string>();
  for (const o of q.options) {
    const d = decisionOf[o.kind];
    if (!d || seen.has(d)) continue;
    seen.add(d);
    out.push({ decision: d, label: o.label || decisionLabels[d]! });
  }
  if (out.length === 0) {
    for (const d of ["accept", "accept_for_session", "decline"]) out.push({ decision: d, label: decisionLabels[d]! });
  }
  out.push({ decision: "cancel", label: decisionLabels.cancel! });
  return out;
}

export function RequestView({ q, threadId }: { q: RuntimeRequest; threadId: string }) {
  const [busy, setBusy] = useState("");
  const [error, setError] = useState("");
  if (q.status !== "pending") {
    return (
      <p class="muted" data-request-id={q.id} data-request-status={q.status}>
        {q.kind.replaceAll("_", " ")} “{q.title}”: {q.status}
        {q.decision && ` (${q.decision}`}
        {q.answeredBy && ` by ${q.answeredBy}`}
        {q.decision && ")"}
      </p>
    );
  }
  const answer = async (decision: string) => {
    setBusy(decision);
    setError("");
    try {
      await api.answerRequest({ commandId: commandId(), threadId, requestId: q.id, decision });
    } catch (err) {
      setError(describe(err));
      setBusy("");
    }
  };
  return (
    <div class="request" data-request-id={q.id} role="group" aria-label={`Request: ${q.title}`}>
      <div>
        <strong>{q.kind.replaceAll("_", " ")}</strong>: {q.title}
      </div>
      {q.delivery === "not_resumable" && <p class="muted">The provider's process is gone: an answer cannot reach it.</p>}
      <div class="choices">
        {choicesOf(q).map((c) => (
          <button
            type="button"
            data-decision={c.decision}
            class={c.decision === "accept" ? "primary" : c.decision === "cancel" ? "danger" : ""}
            disabled={busy !== ""}
            onClick={() => void answer(c.decision)}
          >
            {c.label}
          </button>
        ))}
      </div>
      <Alert error={error} />
    </div>
  );
}
