// What a run shows of its nodes: the user's and the assistant's messages
// (the assistant's text streamed in outside the render), and the items:
// commands with their output's tail, file changes, tool calls, plans.
import { useLayoutEffect, useRef } from "preact/hooks";
import type { Message, TurnItem } from "./gen/baton_pb";
import type { ThreadModel } from "./threadmodel";

export function UserText({ text }: { text: string }) {
  return (
    <div class="msg user">
      <div class="who">you</div>
      <div class="text" data-role="user-text">
        {text}
      </div>
    </div>
  );
}

export function MessageView({ m, model }: { m: Message; model: ThreadModel }) {
  if (m.role !== "assistant") return <UserText text={m.text} />;
  return (
    <div class="msg assistant" data-message-id={m.id}>
      <div class="who">assistant{m.status && m.status !== "completed" ? ` · ${m.status}` : ""}</div>
      <AssistantText m={m} model={model} />
    </div>
  );
}

// AssistantText is the element streamed text is appended to: the render
// never writes its text; the model's sink does, once a frame.
function AssistantText({ m, model }: { m: Message; model: ThreadModel }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => model.sink.attach(m.id, ref.current!), [m, model]);
  return <div class="text" data-role="assistant-text" ref={ref} />;
}

// tail is the end of a long output.
export function tail(text: string, lines = 40): string {
  const all = text.split("\n");
  return all.length > lines ? "…\n" + all.slice(-lines).join("\n") : text;
}

const itemKinds: Record<string, string> = {
  command_execution: "command",
  file_change: "files",
  tool_call: "tool",
  reasoning: "reasoning",
  plan: "plan",
  web_search: "search",
};

// PlanStep is one step of a plan as providers say it: codex's
// {step, status}, ACP's {content, priority, status}.
interface PlanStep {
  text: string;
  status: string;
}

// planOf reads a plan item's steps from its detail (undefined: not a plan
// the page knows how to read).
function planOf(detail: string): { steps: PlanStep[]; explanation: string } | undefined {
  let d: unknown;
  try {
    d = JSON.parse(detail);
  } catch {
    return undefined;
  }
  const o = (typeof d === "object" && d !== null ? d : {}) as Record<string, unknown>;
  const list = Array.isArray(d) ? d : Array.isArray(o.plan) ? o.plan : Array.isArray(o.entries) ? o.entries : undefined;
  if (!list) return undefined;
  const steps = list.map((e: Record<string, unknown>) => ({
    text: String(e.step ?? e.content ?? e.title ?? ""),
    status: String(e.status ?? ""),
  }));
  return { steps, explanation: typeof o.explanation === "string" ? o.explanation : "" };
}

const stepMarks: Record<string, string> = { completed: "✓", in_progress: "▸", inProgress: "▸", pending: "○" };

function PlanView({ plan }: { plan: { steps: PlanStep[]; explanation: string } }) {
  return (
    <>
      {plan.explanation && <p class="muted">{plan.explanation}</p>}
      <ol class="plan" aria-label="Plan">
        {plan.steps.map((s) => (
          <li data-step-status={s.status}>
            <span aria-hidden="true">{stepMarks[s.status] ?? "·"}</span> {s.text}
            <span class="sr-only"> ({s.status})</span>
          </li>
        ))}
      </ol>
    </>
  );
}

export function ItemView({ it }: { it: TurnItem }) {
  const kind = itemKinds[it.kind] ?? it.kind;
  const plan = it.kind === "plan" && it.detail ? planOf(it.detail) : undefined;
  if (plan) {
    return (
      <details class="item item-plan" data-item-id={it.id} data-kind={it.kind} open>
        <summary>
          <span class="kind">plan</span>
          {it.title || `${plan.steps.length} steps`} <span class={`muted status-${it.status}`}>{it.status}</span>
        </summary>
        <PlanView plan={plan} />
      </details>
    );
  }
  const detail = it.detail ? pretty(it.detail) : "";
  const body = it.text ? tail(it.text) : "";
  return (
    <details class={`item item-${it.kind}`} data-item-id={it.id} data-kind={it.kind} open={it.status === "in_progress" && body !== ""}>
      <summary>
        <span class="kind">{kind}</span>
        {it.title || it.id} <span class={`muted status-${it.status}`}>{it.status}</span>
      </summary>
      {body && <pre aria-label="Output">{body}</pre>}
      {detail && <pre aria-label="Detail">{detail}</pre>}
    </details>
  );
}

function pretty(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}
