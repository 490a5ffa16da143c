// Alert is what went wrong with the controls beside it, as a screen
// reader announces it: a paragraph, or inline in a row of controls.
export function Alert(props: { error: string; inline?: boolean }) {
  if (!props.error) return null;
  return props.inline ? (
    <span class="error" role="alert">
      {props.error}
    </span>
  ) : (
    <p class="error" role="alert">
      {props.error}
    </p>
  );
}
