// Package sdk is everything a Baton provider plugin needs.
//
// A plugin is a program that drives one kind of coding agent (a provider
// process such as an ACP agent, codex app-server or claude) and reports what
// it does as normalized [RuntimeEvent] values. To write one, implement
// [Adapter] and call [Serve] from main:
//
//	func main() {
//		log := sdk.NewLogger("myagent")
//		sdk.Serve(myagent.New(log), sdk.WithLogger(log))
//	}
//
// Optional abilities are small interfaces ([Steerer], [Rollbacker],
// [SnapshotReader]); implementing one is what advertises the capability, so a
// plugin cannot claim what it does not do.
//
// The sub-packages carry the rest of the contract: providerproc starts and
// stops provider processes, ndjson frames their stdio, framelog keeps raw
// frames for diagnosis, transcript and replay are the replay-testing format
// and peer, plugintest is the conformance kit, and pluginclient is the host's
// half of the wire.
package sdk
