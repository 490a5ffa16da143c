package testbin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/baton-run/baton/sdk/transcript"
)

// LongTurn is how a provider's simple transcript is made one long turn for
// the streaming benchmarks: the entry of its answer's chunk, and where in
// that entry's frame the text is.
type LongTurn struct {
	Provider, Label string
	Text            func(frame map[string]any) (parent map[string]any, key string)
}

// ACPTurn, CodexTurn and ClaudeTurn are the long turns of ACP's
// session/update agent_message_chunk, codex's item/agentMessage/delta and
// claude's assistant message.
var (
	ACPTurn = LongTurn{"acp", "8.session/update.agent_message_chunk", func(f map[string]any) (map[string]any, string) {
		return f["params"].(map[string]any)["update"].(map[string]any)["content"].(map[string]any), "text"
	}}
	CodexTurn = LongTurn{"codex", "20.item/agentMessage/delta", func(f map[string]any) (map[string]any, string) {
		return f["params"].(map[string]any), "delta"
	}}
	// ClaudeTurn: claude's stream-json gives an answer as assistant
	// messages of whole content blocks (the plugin reads no partial
	// messages), so a long claude turn is its text block's message sent N
	// times.
	ClaudeTurn = LongTurn{"claude", "11.assistant", func(f map[string]any) (map[string]any, string) {
		return f["message"].(map[string]any)["content"].([]any)[0].(map[string]any), "text"
	}}
)

// WriteLongTurn writes, in dir, the provider's simple transcript (under
// root/testdata) with its answer's chunk sent n times, each with its own
// text ("c1 " ...), and returns its path. With pace 0 the chunk is one
// entry the peer repeats at once (it loads at once: 100,000 entries cost
// the peer half a second); with pace > 0, n entries pace ms apart. The
// transcript's other waits are dropped.
func WriteLongTurn(root, dir string, turn LongTurn, n, pace int) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "testdata", turn.Provider, "simple.ndjson"))
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // "<n>" as it is, for the peer to number
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var e map[string]any
		if err := json.Unmarshal(line, &e); err != nil {
			return "", fmt.Errorf("%s: %w", turn.Provider, err)
		}
		delete(e, "afterMs")
		if e["label"] != turn.Label {
			enc.Encode(e)
			continue
		}
		parent, key := turn.Text(e["frame"].(map[string]any))
		if pace == 0 {
			parent[key], e["repeat"] = "c"+transcript.RepeatN+" ", n
			enc.Encode(e)
			continue
		}
		for i := range n {
			parent[key], e["afterMs"] = fmt.Sprintf("c%d ", i+1), pace
			enc.Encode(e)
		}
	}
	name := filepath.Join(dir, turn.Provider+"-long.ndjson")
	return name, os.WriteFile(name, out.Bytes(), 0o600)
}
