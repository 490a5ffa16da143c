// The one client of the baton.v1 service the page uses: generated from
// host/api/baton/v1/baton.proto, spoken over the Connect protocol (binary)
// to the page's own origin, where the session cookie signs each call in.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { Baton } from "./gen/baton_pb";

const transport = createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: true,
});

export const api = createClient(Baton, transport);

// commandId names a command the page sends, so that a retry of the same
// click is one command to the service. (crypto.getRandomValues, unlike
// randomUUID, works on a page served over plain HTTP to another host.)
export function commandId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return "web:" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// signedOut says an error means the session is gone (or never was).
export function signedOut(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Unauthenticated;
}

// describe turns an error into the words the page shows.
export function describe(err: unknown): string {
  if (err instanceof ConnectError) return err.rawMessage || Code[err.code];
  if (err instanceof Error) return err.message;
  return String(err);
}
