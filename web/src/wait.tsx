// A usage-limit wait as the list and the thread page show it.
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { useState } from "preact/hooks";
import { api, commandId, describe } from "./api";
import { useSeconds } from "./store";
import { countdown, iso, ms } from "./time";
import { Alert } from "./alert";

// WaitLine shows a usage-limit wait's countdown and a button that cancels
// it: an interrupt of the waiting run (runId; empty: the active run).
export function WaitLine(props: { threadId: string; at: Timestamp; provider: string; what: string; runId?: string; note?: string }) {
  const t = useSeconds();
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const at = ms(props.at);
  const cancel = async () => {
    setBusy(true);
    try {
      await api.interrupt({ commandId: commandId(), threadId: props.threadId, runId: props.runId ?? "" });
    } catch (err) {
      setError(describe(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="wait" data-role="wait">
      <span>
        Waiting for the {props.provider} {props.what} to reset: continues in{" "}
        <time dateTime={iso(at)} title={iso(at)} data-role="countdown">
          {countdown(at, t)}
        </time>
        {props.note && ` ${props.note}`}
      </span>
      <button type="button" data-action="cancel-wait" onClick={() => void cancel()} disabled={busy}>
        Cancel wait
      </button>
      <Alert error={error} inline />
    </div>
  );
}
