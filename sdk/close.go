package sdk

import "context"

// forceCloseKey marks the context of a forced CloseSession.
type forceCloseKey struct{}

// ForceClose marks ctx as the context of a forced close: the host ends a
// session whose provider did not stop when asked (an interrupt it ignored
// past the host's grace, or a user's forced stop). Serve passes it to
// [Adapter.CloseSession]; providerproc's Close, given it, ends the
// provider's process group at once (SIGTERM, then SIGKILL after its grace)
// instead of closing the provider's input and waiting first. An adapter
// that stops its provider some other way checks [ForceClosing].
func ForceClose(ctx context.Context) context.Context {
	return context.WithValue(ctx, forceCloseKey{}, true)
}

// ForceClosing says whether ctx is a forced close's (see [ForceClose]).
func ForceClosing(ctx context.Context) bool {
	forced, _ := ctx.Value(forceCloseKey{}).(bool)
	return forced
}
