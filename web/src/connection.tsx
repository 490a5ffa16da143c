// Connection shows whether the page's Subscribe stream is open.
export function Connection({ live }: { live: boolean }) {
  return (
    <span class={`connection ${live ? "live" : "offline"}`} data-role="connection" data-live={String(live)} role="status">
      {live ? "live" : "connecting…"}
    </span>
  );
}
