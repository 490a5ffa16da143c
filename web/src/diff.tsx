// DiffView shows a unified diff, a line each, added lines and removed ones
// coloured, file and hunk headers set apart. Long diffs show their first
// lines and the rest on demand.
import { useState } from "preact/hooks";

const firstLines = 2000;

function lineClass(line: string): string {
  if (line.startsWith("diff --git") || line.startsWith("+++ ") || line.startsWith("--- ")) return "ln file";
  if (line.startsWith("@@")) return "ln hunk";
  if (line.startsWith("+")) return "ln add";
  if (line.startsWith("-")) return "ln del";
  return "ln";
}

export function DiffView({ patch, truncated, size }: { patch: string; truncated: boolean; size: bigint }) {
  const [all, setAll] = useState(false);
  const lines = patch.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const shown = all ? lines : lines.slice(0, firstLines);
  return (
    <div class="diff" data-role="diff" role="region" aria-label="Diff">
      {lines.length === 0 && <p class="muted">No changes.</p>}
      <pre>
        {shown.map((l) => (
          <span class={lineClass(l)}>{l}</span>
        ))}
      </pre>
      {shown.length < lines.length && (
        <button type="button" onClick={() => setAll(true)}>
          Show all {lines.length} lines
        </button>
      )}
      {truncated && <p class="muted">The diff is cut short: it is {String(size)} bytes in all.</p>}
    </div>
  );
}
