package codex

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/sessions"
)

// normalizer turns one codex connection's notifications and server
// requests into runtime events. It does no I/O; the session feeds it frames
// in the order they arrived.
//
// Threads: the session's own thread is the root. Every other thread that
// shows up is announced with a thread_started event naming its parent
// before any of its turns, because the host binds a turn on a thread it
// does not know as a root turn, whose end would end the run. codex 0.171.0
// sends no thread/started for a sub-agent's thread: its parent is learned
// from the collabAgentToolCall item that spawned it (senderThreadId,
// receiverThreadIds), else from turn.rootTurnId (a turn of the parent),
// else it is taken to be the root thread.
type normalizer struct {
	root string
	cwd  string

	known      map[string]bool   // threads announced with thread_started
	parents    map[string]string // child thread -> parent, learned before the child shows up
	prompts    map[string]string // child thread -> the prompt it was spawned with
	turnThread map[string]string // turn -> its thread
	active     map[string]string // thread -> its in-progress turn
	ended      map[string]bool   // turns that reached their terminal
	announced  map[string]bool   // turns a turn_started named
	items      sessions.Items[struct{}]
	usage      map[string]sdk.Usage // turn -> the sum of its model calls
	history    map[string]string    // thread -> its historyMode, where codex said
	models     map[string]string    // thread -> its model, where codex said
	// clientTurn is the host's id for the root turn being started, given
	// to the next root turn/started.
	clientTurn string
	// snapshots are the last rate-limit snapshots, by limit id: a usage
	// limit's reset is in them.
	snapshots map[string]limitSnapshot
	// clock tells a limit's reset in the past from one to come when a
	// frame does not say when codex sent it (nil: the system clock).
	clock clock.Clock
}

func newNormalizer(root, cwd string) *normalizer {
	n := &normalizer{root: root, cwd: cwd, known: map[string]bool{}, parents: map[string]string{},
		prompts: map[string]string{}, turnThread: map[string]string{}, active: map[string]string{}, ended: map[string]bool{}, announced: map[string]bool{},
		usage: map[string]sdk.Usage{}, history: map[string]string{}, models: map[string]string{},
		snapshots: map[string]limitSnapshot{}}
	if root != "" {
		n.setRoot(root)
	}
	return n
}

// activeTurn is the in-progress turn of a thread ("" when none).
func (n *normalizer) activeTurn(thread string) string { return n.active[thread] }

// turnStarted records a turn the client started (the turn/start response),
// so that a steer or an interrupt can name it before turn/started arrives.
func (n *normalizer) turnStarted(thread, turn string) {
	n.turnThread[turn] = thread
	if !n.ended[turn] { // the response can be handled after the turn ended
		n.active[thread] = turn
	}
}

// expectTurn says that the next root turn is the one the host started as
// clientTurn.
func (n *normalizer) expectTurn(clientTurn string) { n.clientTurn = clientTurn }

// rememberThread records how codex keeps a thread's history and the
// model it runs (for its usage), from a Thread object (thread/start, thread/resume, thread/started, a rollback's
// answer). An object that does not say leaves what is known.
func (n *normalizer) rememberThread(t thread) {
	if t.ID != "" && t.HistoryMode != "" {
		n.history[t.ID] = t.HistoryMode
	}
	if t.ID != "" && t.Model != "" {
		n.models[t.ID] = t.Model
	}
}

// historyMode is the thread's historyMode ("" when codex never said).
func (n *normalizer) historyMode(thread string) string { return n.history[thread] }

// setRoot names the session's own thread once thread/start or
// thread/resume answered.
func (n *normalizer) setRoot(thread string) {
	n.root = thread
	n.known[thread] = true
}

// ignored are notifications that carry nothing the host uses. They are
// dropped quietly; any other unknown method becomes a diagnostic.
var ignored = map[string]bool{
	"thread/status/changed": true, "thread/readState/changed": true, "configWarning": true,
	"remoteControl/status/changed": true, "deprecationNotice": true, "warning": true,
	"serverRequest/resolved": true, "turn/diff/updated": true, "thread/name/updated": true,
	"skills/changed": true, "mcpServer/startupStatus/updated": true, "account/updated": true,
	"app/list/updated": true, "thread/settings/updated": true, "hook/started": true, "hook/completed": true,
	"item/commandExecution/terminalInteraction": true, "item/autoApprovalReview/started": true,
	"item/autoApprovalReview/completed": true, "thread/compacted": true, "model/rerouted": true,
	"thread/goal/updated": true, "thread/goal/cleared": true,
	// After thread/revert: the rollback's answer came first and said it all.
	"thread/reverted": true,
}

func (n *normalizer) now() time.Time { return clock.Or(n.clock).Now() }

// notification normalizes one server notification.
func (n *normalizer) notification(method string, params json.RawMessage) []sdk.RuntimeEvent {
	out, err := n.dispatch(method, params)
	if err != nil {
		return append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()})
	}
	return out
}

func (n *normalizer) dispatch(method string, params json.RawMessage) ([]sdk.RuntimeEvent, error) {
	switch method {
	case "thread/started":
		var p threadStartedNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return n.threadStarted(p.Thread), nil
	case "turn/started":
		var p turnNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		out := n.announce(p.ThreadID, p.Turn.RootTurnID)
		n.turnStarted(p.ThreadID, p.Turn.ID)
		n.announced[p.Turn.ID] = true
		ev := sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: p.ThreadID, TurnRef: p.Turn.ID}
		if p.ThreadID != n.root {
			ev.Title = n.prompts[p.ThreadID]
		} else {
			// The root thread's turns are the host's: name the one it asked
			// for (turn/start is answered before turn/started, but the
			// answer may be read after it).
			ev.ClientTurnID, n.clientTurn = n.clientTurn, ""
		}
		return append(out, ev), nil
	case "turn/completed":
		var p turnNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return n.turnCompleted(p, frameOf(method, params)), nil
	case "item/started", "item/completed":
		var p itemNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		var it item
		if err := json.Unmarshal(p.Item, &it); err != nil || it.ID == "" || it.Type == "" {
			if err == nil {
				err = fmt.Errorf("an item needs an id and a type, got %.200s", p.Item)
			}
			return nil, fmt.Errorf("%s item: %w", method, err)
		}
		return n.item(method == "item/completed", p, it), nil
	case "item/agentMessage/delta", "item/reasoning/summaryTextDelta", "item/reasoning/textDelta",
		"item/commandExecution/outputDelta", "item/fileChange/outputDelta", "item/plan/delta":
		var p deltaNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return n.delta(method, p), nil
	case "item/reasoning/summaryPartAdded":
		var p struct {
			deltaNotification
			SummaryIndex int `json:"summaryIndex"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if it := n.items.Get(p.ThreadID, p.ItemID); it != nil && p.SummaryIndex > 0 && it.Streamed.Len() > 0 {
			return n.delta(method, deltaNotification{ThreadID: p.ThreadID, TurnID: p.TurnID, ItemID: p.ItemID, Delta: summarySep}), nil
		}
		return nil, nil
	case "item/fileChange/patchUpdated", "item/mcpToolCall/progress":
		var p deltaNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		it := n.items.Get(p.ThreadID, p.ItemID)
		if it == nil {
			return nil, nil
		}
		ev := it.Event(sdk.EventItemUpdated)
		ev.Detail = params
		return []sdk.RuntimeEvent{ev}, nil
	case "turn/plan/updated":
		var p planNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		detail, _ := json.Marshal(map[string]any{"explanation": p.Explanation, "plan": p.Plan})
		return append(n.announce(p.ThreadID, ""), sdk.RuntimeEvent{Kind: sdk.EventPlanUpdated, ThreadRef: p.ThreadID,
			TurnRef: p.TurnID, ItemKind: sdk.ItemPlan, Detail: detail}), nil
	case "thread/tokenUsage/updated":
		var p tokenUsageNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		// A turn's usage: the sum of its model calls ("last" is one call;
		// "total" runs over the whole thread, earlier turns included). The
		// breakdown codex sent is in Detail.
		if p.TokenUsage.Last == nil {
			return nil, fmt.Errorf("%s has no tokenUsage.last", method)
		}
		if _, seen := n.turnThread[p.TurnID]; !seen {
			// A resumed thread's restored total names a turn of an earlier
			// process (or none): no turn of this session.
			return n.announce(p.ThreadID, ""), nil
		}
		l := p.TokenUsage.Last
		u := n.usage[p.TurnID]
		u.Add(sdk.Usage{InputTokens: l.InputTokens, OutputTokens: l.OutputTokens, CachedInputTokens: l.CachedInputTokens,
			ReasoningTokens: l.ReasoningOutputTokens, TotalTokens: l.TotalTokens, Model: n.models[p.ThreadID]})
		n.usage[p.TurnID] = u
		var detail json.RawMessage
		var raw struct {
			TokenUsage json.RawMessage `json:"tokenUsage"`
		}
		if json.Unmarshal(params, &raw) == nil {
			detail = raw.TokenUsage
		}
		return append(n.announce(p.ThreadID, ""), sdk.RuntimeEvent{Kind: sdk.EventUsage, ThreadRef: p.ThreadID, TurnRef: p.TurnID,
			Usage: &u, Detail: detail}), nil
	case "account/rateLimits/updated":
		var p rateLimitsNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		n.snapshots[deref(p.RateLimits.LimitID)] = limitSnapshot{p: p, raw: frameOf(method, params)}
		return rateLimits(p, params), nil
	case "error":
		var p errorNotification
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		title := "codex reported an error"
		if p.WillRetry {
			title += " (it retries)"
		}
		return append(n.announce(p.ThreadID, ""), sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, ThreadRef: p.ThreadID, TurnRef: p.TurnID,
			Title: title, Text: p.Error.Message, Failure: p.Error.failure("error"), Detail: params}), nil
	}
	if ignored[method] {
		return nil, nil
	}
	// Kept, never fatal: a newer codex's notification the host may still show.
	return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "unknown codex notification " + method, Detail: params}}, nil
}

// summarySep separates the parts of a reasoning summary.
const summarySep = "\n\n"

// threadStarted announces a thread codex said it started (a fork, or a
// sub-agent in versions that report it). The session's own thread was
// announced when the session opened.
func (n *normalizer) threadStarted(t thread) []sdk.RuntimeEvent {
	n.rememberThread(t)
	if t.ID == "" || n.known[t.ID] {
		return nil
	}
	if n.root == "" {
		// Our own new thread, reported while thread/start's response is
		// still on its way to the caller: the session announces it.
		n.setRoot(t.ID)
		return nil
	}
	if t.ParentThreadID != nil && *t.ParentThreadID != "" {
		n.parents[t.ID] = *t.ParentThreadID
	}
	return n.announceWith(t.ID, n.parents[t.ID])
}

// announce emits thread_started for a thread seen for the first time,
// naming its parent (see normalizer). rootTurn is the turn.rootTurnId of a
// turn on it, when known.
func (n *normalizer) announce(thread, rootTurn string) []sdk.RuntimeEvent {
	if thread == "" || n.known[thread] {
		return nil
	}
	parent := n.parents[thread]
	if parent == "" {
		if t, ok := n.turnThread[rootTurn]; ok && t != thread {
			parent = t
		}
	}
	if parent == "" {
		parent = n.root
	}
	return n.announceWith(thread, parent)
}

func (n *normalizer) announceWith(thread, parent string) []sdk.RuntimeEvent {
	n.known[thread] = true
	delete(n.parents, thread)
	var out []sdk.RuntimeEvent
	if parent != "" && !n.known[parent] {
		out = n.announce(parent, "") // a grandchild's parent, never seen itself
	}
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: thread, ParentThreadRef: parent})
}

// itemKind maps a codex item type to an item kind.
func itemKind(typ string) sdk.ItemKind {
	switch typ {
	case "agentMessage":
		return sdk.ItemAssistantMessage
	case "reasoning":
		return sdk.ItemReasoning
	case "commandExecution":
		return sdk.ItemCommandExecution
	case "fileChange":
		return sdk.ItemFileChange
	case "plan":
		return sdk.ItemPlan
	case "collabAgentToolCall":
		return sdk.ItemSubagent
	case "userMessage":
		return sdk.ItemUserMessage
	}
	// mcpToolCall, dynamicToolCall, webSearch, imageView, imageGeneration,
	// sleep, contextCompaction, … and any type a newer codex adds.
	return sdk.ItemToolCall
}

// itemStatus maps an item's status when it completes.
func itemStatus(s *string) sdk.ItemStatus {
	if s == nil {
		return sdk.ItemDone
	}
	switch *s {
	case "failed":
		return sdk.ItemFailed
	case "declined":
		return sdk.ItemDeclined
	}
	return sdk.ItemDone
}

// item normalizes item/started and item/completed.
func (n *normalizer) item(completed bool, p itemNotification, it item) []sdk.RuntimeEvent {
	if it.Type == "userMessage" && p.ThreadID == n.root {
		// The user's own input (or a steer): the host has it already.
		return nil
	}
	out := n.announce(p.ThreadID, "")
	if it.Type == "collabAgentToolCall" {
		out = append(out, n.learnChildren(it)...)
	}
	ev := sdk.RuntimeEvent{ThreadRef: p.ThreadID, TurnRef: p.TurnID, ItemRef: it.ID, ItemKind: itemKind(it.Type),
		Title: n.itemTitle(it), Detail: n.itemDetail(it)}
	if ev.Detail == nil && (ev.ItemKind == sdk.ItemToolCall || ev.ItemKind == sdk.ItemSubagent) {
		ev.Detail = p.Item // tool calls and sub-agents keep codex's whole item
	}
	open, isNew := n.items.Start(p.ThreadID, p.TurnID, it.ID, ev.ItemKind, ev.Title)
	if isNew {
		started := open.Started()
		started.Detail = ev.Detail
		out = append(out, started)
	} else if !completed {
		return out // started again: nothing new
	}
	if !completed {
		return out
	}
	if full, ok := itemText(it); ok {
		// Text that arrived without deltas (or more than the deltas).
		if streamed := open.Streamed.String(); strings.HasPrefix(full, streamed) && len(full) > len(streamed) {
			out = append(out, open.Delta(full[len(streamed):]))
		}
	}
	n.items.Forget(open)
	ev.Kind, ev.Status, ev.TurnRef = sdk.EventItemCompleted, itemStatus(it.Status), open.Turn
	return append(out, ev)
}

// learnChildren records the threads a collabAgentToolCall names as
// children of its sender, and announces them.
func (n *normalizer) learnChildren(it item) []sdk.RuntimeEvent {
	if it.SenderThreadID == "" {
		return nil
	}
	var out []sdk.RuntimeEvent
	for _, child := range it.ReceiverThreadIDs {
		if child == "" || n.known[child] {
			continue
		}
		n.parents[child] = it.SenderThreadID
		if it.Prompt != nil {
			n.prompts[child] = *it.Prompt
		}
		out = append(out, n.announce(child, "")...)
	}
	return out
}

// itemText is the whole text of a streamed item, where codex gives it.
func itemText(it item) (string, bool) {
	switch it.Type {
	case "agentMessage", "plan":
		if it.Text != nil {
			return *it.Text, true
		}
	case "reasoning":
		if len(it.Summary) > 0 {
			return strings.Join(it.Summary, summarySep), true
		}
		var content []string
		if json.Unmarshal(it.Content, &content) == nil && len(content) > 0 {
			return strings.Join(content, summarySep), true
		}
	}
	return "", false
}

func (n *normalizer) itemTitle(it item) string {
	switch it.Type {
	case "commandExecution":
		return deref(it.Command)
	case "fileChange":
		var changes []fileUpdate
		_ = json.Unmarshal(it.Changes, &changes)
		paths := make([]string, 0, len(changes))
		for _, c := range changes {
			paths = append(paths, sdk.RelPath(n.cwd, c.Path))
		}
		return strings.Join(paths, ", ")
	case "mcpToolCall":
		if it.Server != nil && *it.Server != "" {
			return sdk.MCPToolTitle(*it.Server, deref(it.Tool))
		}
		return deref(it.Tool)
	case "dynamicToolCall":
		return deref(it.Tool)
	case "collabAgentToolCall":
		t := deref(it.Tool)
		if p := deref(it.Prompt); p != "" {
			t += ": " + sdk.Title(p)
		}
		return t
	case "webSearch":
		return strings.TrimSpace("web search " + deref(it.Query))
	case "imageView":
		return sdk.RelPath(n.cwd, deref(it.Path))
	case "userMessage":
		var content []userInput
		_ = json.Unmarshal(it.Content, &content)
		var texts []string
		for _, c := range content {
			texts = append(texts, c.Text)
		}
		return sdk.Title(strings.Join(texts, " "))
	case "agentMessage", "reasoning", "plan":
		return ""
	}
	return it.Type
}

// itemDetail is what an item's node keeps besides its text.
func (n *normalizer) itemDetail(it item) json.RawMessage {
	var d map[string]any
	switch it.Type {
	case "agentMessage", "reasoning", "plan", "userMessage":
		return nil
	case "commandExecution":
		d = map[string]any{}
		if it.Cwd != nil {
			d["cwd"] = *it.Cwd
		}
		if it.ExitCode != nil {
			d["exitCode"] = *it.ExitCode
		}
		if it.AggregatedOutput != nil {
			d["aggregatedOutput"] = *it.AggregatedOutput
		}
		if it.DurationMs != nil {
			d["durationMs"] = *it.DurationMs
		}
		if it.Status != nil {
			d["status"] = *it.Status
		}
	case "fileChange":
		d = map[string]any{"changes": it.Changes}
		if len(it.Changes) == 0 {
			return nil
		}
	default:
		return nil // the caller keeps the raw item
	}
	if len(d) == 0 {
		return nil
	}
	b, _ := json.Marshal(d)
	return b
}

// deltaKind is the item kind a delta method streams into.
func deltaKind(method string) sdk.ItemKind {
	switch method {
	case "item/agentMessage/delta":
		return sdk.ItemAssistantMessage
	case "item/commandExecution/outputDelta":
		return sdk.ItemCommandExecution
	case "item/fileChange/outputDelta":
		return sdk.ItemFileChange
	case "item/plan/delta":
		return sdk.ItemPlan
	}
	return sdk.ItemReasoning
}

// delta streams a chunk into its item, starting the item if codex did not.
func (n *normalizer) delta(method string, p deltaNotification) []sdk.RuntimeEvent {
	if p.ItemID == "" {
		return []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: method + " has no itemId"}}
	}
	out := n.announce(p.ThreadID, "")
	it, isNew := n.items.Start(p.ThreadID, p.TurnID, p.ItemID, deltaKind(method), "")
	if isNew {
		out = append(out, it.Started())
	}
	if p.Delta == "" {
		return out
	}
	return append(out, it.Delta(p.Delta))
}

// turnStatus maps a codex turn status to a terminal status.
func turnStatus(t turn) (sdk.TurnStatus, *sdk.Failure) {
	switch t.Status {
	case "completed":
		return sdk.TurnCompleted, nil
	case "interrupted":
		return sdk.TurnInterrupted, nil
	case "failed":
		if f := t.Error.failure("turn_failed"); f != nil {
			return sdk.TurnFailed, f
		}
		return sdk.TurnFailed, &sdk.Failure{Code: "turn_failed", Message: "the turn failed"}
	}
	return sdk.TurnFailed, &sdk.Failure{Code: "unknown_turn_status", Message: fmt.Sprintf("turn ended with unknown status %q", t.Status)}
}

// turnCompleted closes what the turn left open and ends it. A codex thread
// takes another turn after any terminal status.
// raw is the turn/completed frame (nil when the process is gone).
func (n *normalizer) turnCompleted(p turnNotification, raw json.RawMessage) []sdk.RuntimeEvent {
	out := n.announce(p.ThreadID, p.Turn.RootTurnID)
	n.turnThread[p.Turn.ID] = p.ThreadID
	n.ended[p.Turn.ID] = true
	delete(n.usage, p.Turn.ID)
	out = append(out, n.items.CloseTurn(p.ThreadID, p.Turn.ID, sdk.ItemFailed, "the item was still open when the turn ended")...)
	if n.active[p.ThreadID] == p.Turn.ID {
		delete(n.active, p.ThreadID)
	}
	status, failure := turnStatus(p.Turn)
	return append(out, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: p.ThreadID, TurnRef: p.Turn.ID,
		Status: status, Failure: failure, Limit: n.limit(p.Turn, raw), ThreadUsable: true, Title: p.Turn.Status})
}

// exited ends every turn still in progress when the codex process is gone:
// failed, on a thread that cannot go on in this process. Sub-agents' turns
// end before the root's.
func (n *normalizer) exited(message string) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	threads := slices.Sorted(maps.Keys(n.active))
	slices.SortStableFunc(threads, func(a, b string) int {
		switch {
		case a == n.root && b != n.root:
			return 1
		case b == n.root && a != n.root:
			return -1
		}
		return 0
	})
	for _, th := range threads {
		if id := n.active[th]; !n.announced[id] {
			// codex answered turn/start and died before turn/started: the
			// turn is announced here, so that its terminal ends a turn the
			// host knows (and binds to the attempt it started).
			ev := sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: th, TurnRef: id}
			if th == n.root {
				ev.ClientTurnID, n.clientTurn = n.clientTurn, ""
			}
			n.announced[id] = true
			out = append(out, ev)
		}
		evs := n.turnCompleted(turnNotification{ThreadID: th, Turn: turn{ID: n.active[th], Status: "failed",
			Error: &turnError{Message: message, CodexErrorInfo: json.RawMessage(`"provider_exited"`)}}}, nil)
		evs[len(evs)-1].ThreadUsable = false
		out = append(out, evs...)
	}
	return out
}

// rateLimits reports each window codex knows of; a snapshot without any
// (every field null, as with a custom model provider) says nothing.
func rateLimits(p rateLimitsNotification, raw json.RawMessage) []sdk.RuntimeEvent {
	var out []sdk.RuntimeEvent
	scope := deref(p.RateLimits.LimitID)
	for _, w := range []struct {
		name string
		w    *rateLimitWindow
	}{{"primary", p.RateLimits.Primary}, {"secondary", p.RateLimits.Secondary}} {
		if w.w == nil {
			continue
		}
		rl := &sdk.RateLimit{UsedPercent: w.w.UsedPercent, Scope: strings.TrimPrefix(scope+"/"+w.name, "/")}
		if w.w.ResetsAt != nil {
			rl.ResetsAt = sdk.UnixSeconds(*w.w.ResetsAt)
		}
		out = append(out, sdk.RuntimeEvent{Kind: sdk.EventRateLimit, RateLimit: rl, Detail: raw})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
