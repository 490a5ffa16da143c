// Package sdk is everything a Baton provider plugin needs.
//
// A plugin is a program that drives one kind of coding agent (a provider
// process such as an ACP agent, codex app-server or claude) and reports what
// it does as normalized [RuntimeEvent] values. To write one, implement
// [Adapter] and call server.Serve from main:
//
//	func main() {
//		log := server.NewLogger("myagent")
//		if err := server.Serve(myagent.New(log), server.WithLogger(log)); err != nil {
//			log.Error("serve", "error", err)
//			os.Exit(1)
//		}
//	}
//
// Optional abilities are small interfaces ([Steerer], [Interrupter],
// [Responder], [Rollbacker], [Resumer], [SnapshotReader]). A plugin declares
// its capabilities in its [Description] and implements the matching
// interfaces; Serve refuses a plugin whose two disagree
// ([CheckCapabilities]), so a plugin cannot claim what it does not do.
//
// This package holds the contract and its value types only; it imports no
// gRPC or go-plugin. The sub-packages carry the rest: server serves an
// Adapter; sessions is the machinery adapters share; providerproc starts
// and stops provider processes, ndjson frames their stdio, framelog keeps
// raw frames for diagnosis; transcript and replay are the replay-testing
// format and peer; plugintest is the conformance kit; pluginclient is the
// host's half of the wire.
package sdk
