// Package sdk is the contract between Baton and its provider plugins, and
// the value types that cross it.
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
// # Capabilities
//
// Optional abilities are small interfaces: [Steerer] (native steering),
// [Interrupter] (interrupt), [Responder] (approvals), [Rollbacker] (native
// rollback), [Resumer] (resume) and [SnapshotReader] (thread snapshot). A
// plugin declares its capabilities in [Description.Capabilities] and
// implements the matching interfaces; Serve refuses a plugin whose two
// disagree ([CheckCapabilities]), so a plugin cannot claim what it does not
// do, nor do what the host is not told of. The host handles a missing
// capability by policy: without steering it restarts the turn with the new
// input, without rollback it starts a fresh provider thread with a handoff,
// without resume it starts a fresh conversation and says so.
//
// # Events
//
// A session's events go to the [Emitter] OpenSession is given, in the order
// they happen. The sdk numbers them (Sequence) and keeps them until the
// host has stored them, so a host that reconnects loses none. Every event
// that comes from a provider frame names it (RawFrame, an index into the
// session's raw-frame log, see framelog); events the plugin makes of its
// own accord (a turn it ends because the provider died) carry 0.
//
// Each event kind, the fields it requires, when it may be sent, and what
// the host does with it:
//
//   - [EventThreadStarted]: ThreadRef; ParentThreadRef for a subagent's
//     thread (the Subagents capability). Before the first turn_started on
//     the thread. The host binds the provider thread to the session; a
//     child thread's turns become subagent nodes under the parent's turn.
//   - [EventTurnStarted]: ThreadRef, TurnRef; ClientTurnID echoing the
//     [StartTurnRequest] the turn answers (empty only for a turn the host
//     did not start, a subagent's). After StartTurn took the input, before
//     any item of the turn. The host binds the turn to the run attempt the
//     ClientTurnID names; a turn for an attempt the host no longer wants is
//     interrupted. TurnRef is unique across every session of the provider
//     thread: a session that resumes the thread gives no TurnRef an earlier
//     session of it gave (see Refs below).
//   - [EventItemStarted]: TurnRef, ItemRef (unique across every session of
//     the provider thread, as TurnRef), ItemKind, Title; ParentItemRef for
//     a nested item; Status [ItemInProgress]. Inside a started turn, before
//     its terminal. The host makes an execution node and the item the user
//     reads.
//   - [EventItemUpdated]: ItemRef of a started item; any of Title, Text,
//     Status (an [ItemStatus], the provider's own word for an item in
//     progress among them), Detail. The host updates the node.
//   - [EventContentDelta]: TurnRef, ItemRef, ItemKind, Text (the next
//     chunk). The host appends the chunk to the item's text as it comes:
//     an item's text is its deltas, and nothing else.
//   - [EventItemCompleted]: ItemRef of a started item, once; Status
//     [ItemDone], [ItemFailed] or [ItemDeclined]; Title and Detail final;
//     Text, if any, says why it failed (the host does not add it to the
//     item's text: send text not streamed yet as a last content_delta
//     first, see sessions.Item.Streamed). Before the turn's terminal. The
//     host closes the node; a run's checkpoint waits for every item of its
//     turn to close.
//   - [EventPlanUpdated]: TurnRef, Detail (the steps). The host keeps the
//     turn's plan.
//   - [EventRequestOpened]: RequestRef (unique in the session), RequestKind,
//     Title, Options, TurnRef (the Approvals capability). While the
//     provider waits for an answer. The host answers by the thread's policy or asks the user,
//     through [Responder].
//   - [EventRequestResolved]: RequestRef, Status (the [Decision]).
//     Once the answer reached the provider, or the provider withdrew the
//     question ([DecisionCancel]). The host closes the request. Requests
//     still open when the session ends become not resumable.
//   - [EventUsage]: TurnRef, Usage (the turn's totals so far). The host
//     keeps the last report per attempt; a run's usage is its attempts'.
//   - [EventRateLimit]: RateLimit (Scope, UsedPercent, ResetsAt). Whenever
//     the provider says. The host keeps it when it changes.
//   - [EventTurnTerminal]: TurnRef, Status ([TurnCompleted],
//     [TurnInterrupted] or [TurnFailed]), Failure when failed, Limit when a
//     provider limit ended it; ThreadUsable true when the provider thread
//     can take another turn (the conformance suite wants it on every
//     completed turn, and false on one failed because the session's
//     provider died, runtime_exited failed to follow). Exactly once per
//     started turn, after its items are completed. The root turn's
//     terminal of the attempt the host is running ends the run (completed,
//     interrupted, failed, or blocked on a Limit); a subagent's ends only
//     its node.
//     Interrupted is reported only when the provider confirms it:
//     InterruptTurn returning is an acknowledgement.
//   - [EventRuntimeExited]: Status ([ExitExited], [ExitClosed] after
//     CloseSession, [ExitFailed]), Failure when failed. Exactly once, last:
//     the sdk drops anything emitted after it. A turn still running is
//     ended first (a failed turn_terminal, ThreadUsable false). The host
//     closes the session, fails the running attempt, and marks its open
//     requests not resumable.
//   - [EventDiagnostic]: Title, Text. Anything the provider said that has
//     no other place (a malformed frame, a retry). The host records it on
//     the run. The sdk passes the first five of a title between two turn
//     ends, and before the next turn end (or the session's) one of that
//     title saying how many more there were, with the last three: a
//     provider that prints thousands of malformed lines makes a handful of
//     events, not thousands.
//   - [EventSessionState]: Title, Detail. The provider's own session state.
//     Kept in the raw-frame log only.
//
// Refs: the host binds an event to what it stands for by its refs, and
// a ref it has bound before reads as the same thing seen again (a frame
// reprocessed after a restart binds nothing new). It looks a turn up by
// TurnRef alone among every turn of the thread the user sees, whatever
// session gave it; an item by ItemRef among the items of the run, whose
// attempts may run in several sessions (a continuation after a usage
// limit); a request by the session and RequestRef. So a turn or item ref
// must never come again on the provider thread, in this session or one
// that resumes it: a plugin that numbers its turns "turn-1", "turn-2"
// afresh in each session makes the first turn of a resumed session look
// like an old turn's frame seen again, and the host cannot bind it to
// the run it answers. Use the provider's
// own ids, or refs with a part unique to the session. A user's thread may
// also hold several provider threads (a fresh one after a rollback
// without native rollback, another provider's after a switch), and turns
// are looked up across them all: refs unique beyond the provider thread
// are safest. A request ref needs to be unique in its session only.
//
// A Status is of its kind's vocabulary, a type of its own: [TurnStatus],
// [ExitStatus], [ItemStatus] or [Decision] (the same word in two of them,
// "failed", is two statuses). [StatusesFor] lists the statuses each kind
// may carry. The conformance
// suite (plugintest.Conformance) plays standard scenarios against a plugin
// binary and checks every rule above, the refs of a resumed session
// against an earlier session's among them (plugintest.CheckThread).
//
// # Packages
//
// This package holds the contract and its value types only; it imports no
// gRPC or go-plugin, so the host's pure domain uses its types as they are.
// The sub-packages carry the rest: server serves an Adapter (Serve);
// sessions is the machinery adapters share; providerproc starts and stops
// provider processes, lineproc and jsonrpcproc speak to them over stdio,
// ndjson frames their stdio and sse their HTTP streams, framelog keeps raw
// frames for diagnosis; transcript and replay are the replay-testing
// format and peer; plugintest is the conformance kit; pluginclient is the
// host's half of the wire.
//
// # Versions
//
// [ProtocolVersion] is the wire contract's version, negotiated at the
// handshake: a host refuses a plugin of another version, naming both.
// Fields are only ever added within a version. [Version] is this module's
// release; CHANGELOG.md says what changed in each.
package sdk
