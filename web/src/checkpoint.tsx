// A run's checkpoint on the thread page: the files it changed, its diff on
// demand (Diff), and a rollback to it behind a confirmation (Rollback).
import { useEffect, useRef, useState } from "preact/hooks";
import type { DiffResponse, Run } from "./gen/baton_pb";
import { api, commandId, describe } from "./api";
import { DiffView } from "./diff";
import { Alert } from "./alert";

export function CheckpointView(props: {
  threadId: string;
  run: Run;
  id: string;
  status: string;
  files: { path: string; kind: string; additions: bigint; deletions: bigint; binary: boolean }[];
  onRollback(ordinal: number, checkpointId: string): void;
}) {
  const { threadId, run, id, status, files } = props;
  const [diff, setDiff] = useState<DiffResponse | undefined>();
  const [open, setOpen] = useState(false);
  const [error, setError] = useState("");
  const toggle = async () => {
    if (open) {
      setOpen(false);
      return;
    }
    setOpen(true);
    if (diff) return;
    try {
      setDiff(await api.diff({ threadId, run: run.ordinal }));
    } catch (err) {
      setError(describe(err));
    }
  };
  const ready = status === "ready";
  return (
    <div data-checkpoint-id={id} data-checkpoint-status={status}>
      <div class="checkpoint">
        <span class="muted">
          Checkpoint {status}
          {files.length > 0 && `: ${files.length} file${files.length === 1 ? "" : "s"} changed`}
        </span>
        {ready && files.length > 0 && (
          <button type="button" data-action="diff" aria-expanded={open} onClick={() => void toggle()}>
            {open ? "Hide diff" : "Show diff"}
          </button>
        )}
        {ready && (
          <button type="button" data-action="rollback" onClick={() => props.onRollback(run.ordinal, id)}>
            Roll back to here
          </button>
        )}
      </div>
      {files.length > 0 && (
        <ul class="files">
          {files.map((f) => (
            <li>
              <code>{f.path}</code> <span class="muted">{f.kind}</span>{" "}
              {f.binary ? (
                <span class="muted">binary</span>
              ) : (
                <>
                  <span class="add">+{String(f.additions)}</span> <span class="del">−{String(f.deletions)}</span>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      {open && error && (
        <p class="error" role="alert">
          Could not read the diff: {error}
        </p>
      )}
      {open && diff && <DiffView patch={diff.patch} truncated={diff.truncated} size={diff.size} />}
    </div>
  );
}

export function RollbackDialog(props: { threadId: string; ordinal: number; checkpointId: string; onClose(): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const confirm = async () => {
    setBusy(true);
    try {
      await api.rollback({ commandId: commandId(), threadId: props.threadId, checkpointId: props.checkpointId });
      ref.current?.close();
    } catch (err) {
      setError(describe(err));
      setBusy(false);
    }
  };
  return (
    <dialog ref={ref} onClose={props.onClose} aria-labelledby="rollback-title">
      <h2 id="rollback-title">{props.ordinal === 0 ? "Roll back to the start?" : `Roll back to run ${props.ordinal}?`}</h2>
      <p>
        The thread's files go back to how they were{" "}
        {props.ordinal === 0 ? "before its first run" : `after run ${props.ordinal}`}, and the provider's conversation to
        the same point. The runs after it are marked rolled back; the files as they are now are saved under a ref.
      </p>
      <Alert error={error} />
      <div class="row">
        <button type="button" data-action="cancel-rollback" onClick={() => ref.current?.close()}>
          Keep the files
        </button>
        <button type="button" class="danger" data-action="confirm-rollback" disabled={busy} onClick={() => void confirm()}>
          Roll back
        </button>
      </div>
    </dialog>
  );
}
