package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk/plugintest"
)

// The ACP agent harness. The standard transcripts (testdata/acp, recorded
// from claude-code-acp) are the protocol's scenarios; each agent with
// transcripts of its own under testdata/acp/agents/ID plays them
// retargeted to its identity: its initialize answer and the shape of its
// session/new answer, taken from its own transcripts, in place of
// claude-code-acp's, and the updates' _meta (claude-code-acp's extension)
// left out. Then the agent's own transcripts play for it alone.
//
// BATON_ACP_AGENT=ID (make plugin-test PROVIDER=acp AGENT=ID) plays one
// agent's.

// agentEnv names the one agent the harness plays (empty: every one).
const agentEnv = "BATON_ACP_AGENT"

// TestAgentHarness plays, for each agent, the standard scenarios
// retargeted to it, then its own recorded ones, through the conformance
// suite (plugintest.Conformance).
func TestAgentHarness(t *testing.T) {
	ids := agentIDs(t)
	if only := os.Getenv(agentEnv); only != "" {
		if !slices.Contains(ids, only) {
			t.Fatalf("%s=%s: no transcripts of that agent under %s (have: %s)", agentEnv, only, agentsData, strings.Join(ids, ", "))
		}
		ids = []string{only}
	}
	bin := plugintest.Build(t, ".")
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			dir := filepath.Join(agentsData, id)
			ident := identityOf(t, dir)
			t.Logf("%s: %s", id, ident)
			t.Run("retargeted", func(t *testing.T) {
				plugintest.Conformance(t, bin, retargetAll(t, plugintest.Dir(testdata), ident))
			})
			t.Run("recorded", func(t *testing.T) {
				plugintest.Conformance(t, bin, ownTranscripts(dir))
			})
		})
	}
}

// agentIDs are the agents with transcripts under agentsData.
func agentIDs(t *testing.T) []string {
	ents, err := os.ReadDir(agentsData)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// identity is what makes an agent itself on the wire, before any turn.
type identity struct {
	source     string         // the transcript it was read from
	initialize map[string]any // its initialize result
	sessionNew map[string]any // its session/new result (its sessionId left out)
}

func (i identity) String() string {
	info, _ := json.Marshal(i.initialize["agentInfo"])
	keys := slices.Sorted(maps.Keys(i.sessionNew))
	return fmt.Sprintf("agentInfo %s, loadSession %v, session/new answers %v (from %s)", info, i.loadSession(), keys, filepath.Base(i.source))
}

func (i identity) loadSession() bool {
	caps, _ := i.initialize["agentCapabilities"].(map[string]any)
	load, _ := caps["loadSession"].(bool)
	return load
}

// identityOf reads an agent's identity from the first of its transcripts
// (simple.ndjson first) that holds both answers.
func identityOf(t *testing.T, dir string) identity {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	slices.SortStableFunc(files, func(a, b string) int {
		return boolInt(filepath.Base(b) == "simple.ndjson") - boolInt(filepath.Base(a) == "simple.ndjson")
	})
	for _, f := range files {
		id := identity{source: f}
		walkAnswers(t, f, func(method string, frame map[string]any) {
			res, _ := frame["result"].(map[string]any)
			switch {
			case method == "initialize" && id.initialize == nil:
				id.initialize = res
			case method == "session/new" && id.sessionNew == nil && res != nil:
				id.sessionNew = maps.Clone(res)
				delete(id.sessionNew, "sessionId")
			}
		})
		if id.initialize != nil && id.sessionNew != nil {
			return id
		}
	}
	t.Fatalf("no transcript in %s holds the agent's initialize and session/new answers", dir)
	return identity{}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// entry is one transcript line, decoded.
type entry = map[string]any

// readEntries reads a transcript's lines.
func readEntries(t *testing.T, file string) []entry {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, e)
	}
	return out
}

// walkAnswers calls fn with each answer the agent gives to one of the
// client's requests, and the request's method.
func walkAnswers(t *testing.T, file string, fn func(method string, frame map[string]any)) {
	t.Helper()
	answers(readEntries(t, file), fn)
}

func answers(es []entry, fn func(method string, frame map[string]any)) {
	asked := map[string]string{} // request id -> method
	for _, e := range es {
		frame, _ := e["frame"].(map[string]any)
		if frame == nil {
			continue
		}
		id, hasID := frame["id"]
		key := fmt.Sprint(id)
		switch e["type"] {
		case "expect_outbound":
			if m, ok := frame["method"].(string); ok && hasID {
				asked[key] = m
			}
		case "emit_inbound":
			if _, isRequest := frame["method"]; hasID && !isRequest {
				if m, ok := asked[key]; ok {
					fn(m, frame)
				}
			}
		}
	}
}

// retargetAll retargets each standard transcript to the agent; a scenario
// the agent cannot play is skipped, saying why.
func retargetAll(t *testing.T, std plugintest.Transcripts, id identity) plugintest.Transcripts {
	out := plugintest.Transcripts{}
	dir := t.TempDir()
	for sc, tr := range std {
		if _, err := os.Stat(tr.File); err != nil {
			out[sc] = tr // missing: the suite says so, or makes it
			continue
		}
		if sc == plugintest.Resume && !id.loadSession() {
			tr.Skip = "the agent does not load sessions (its initialize answer has no loadSession)"
			out[sc] = tr
			continue
		}
		tr.File = retarget(t, tr.File, filepath.Join(dir, filepath.Base(tr.File)), id)
		out[sc] = tr
	}
	return out
}

// retarget writes the transcript in as the agent would have answered its
// handshake, to out, and returns out.
func retarget(t *testing.T, in, out string, id identity) string {
	t.Helper()
	es := readEntries(t, in)
	answers(es, func(method string, frame map[string]any) {
		switch method {
		case "initialize":
			frame["result"] = clone(t, id.initialize)
		case "session/new":
			res, _ := frame["result"].(map[string]any)
			if res == nil {
				return // an error answer stays
			}
			n := clone(t, id.sessionNew)
			n["sessionId"] = res["sessionId"] // the frames after it name it
			frame["result"] = n
		}
	})
	var b bytes.Buffer
	for _, e := range es {
		switch e["type"] {
		case "transcript_start":
			meta, _ := e["metadata"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			meta["retargetedTo"] = fmt.Sprint(id.initialize["agentInfo"])
			e["metadata"] = meta
		case "emit_inbound":
			frame, _ := e["frame"].(map[string]any)
			if params, _ := frame["params"].(map[string]any); params != nil {
				if u, _ := params["update"].(map[string]any); u != nil {
					delete(u, "_meta") // claude-code-acp's extension
				}
			}
		}
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(out, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// clone is a deep copy of a JSON object.
func clone(t *testing.T, m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// ownTranscripts are the standard scenarios an agent was recorded in
// (dir/SCENARIO.ndjson, its inputs beside it or the standard ones); the
// others are skipped, saying so.
func ownTranscripts(dir string) plugintest.Transcripts {
	own := plugintest.Dir(dir)
	std := plugintest.Dir(testdata)
	_, noSimple := os.Stat(own[plugintest.Simple].File)
	for sc, tr := range own {
		if _, err := os.Stat(tr.File); err != nil {
			switch {
			case sc != plugintest.CrashMidTurn && sc != plugintest.MalformedFrames:
				tr.Skip = "not recorded from this agent"
			case noSimple != nil:
				tr.Skip = "made from the agent's simple transcript, and none was recorded"
			}
			own[sc] = tr
			continue
		}
		if tr.Inputs == "" {
			tr.Inputs = std[sc].Inputs
		}
		own[sc] = tr
	}
	return own
}

// TestRetarget: a standard transcript retargeted to an agent answers the
// handshake as the agent does (its initialize answer whole, its
// session/new answer's shape with the transcript's own session id) and
// carries no claude-code-acp _meta; every other line is as it was.
func TestRetarget(t *testing.T) {
	id := identityOf(t, filepath.Join(agentsData, "grok"))
	in := filepath.Join(testdata, "approval_accept.ndjson")
	out := retarget(t, in, filepath.Join(t.TempDir(), "r.ndjson"), id)
	before, after := readEntries(t, in), readEntries(t, out)
	if len(before) != len(after) {
		t.Fatalf("%d lines became %d", len(before), len(after))
	}
	var got []string
	answers(after, func(method string, frame map[string]any) {
		if method == "initialize" || method == "session/new" {
			b, _ := json.Marshal(frame["result"])
			got = append(got, method+" "+string(b))
		}
	})
	want := []string{
		`initialize {"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"sse":true},"promptCapabilities":{"audio":false,"embeddedContext":true,"image":false}},"agentInfo":{"name":"grok-replay","version":"1"},"authMethods":[{"id":"replay","name":"Replay"}],"protocolVersion":1}`,
		`session/new {"models":{"availableModels":[{"modelId":"grok-build","name":"Grok Build"},{"modelId":"grok-composer-2.5-fast","name":"Grok Composer 2.5 Fast"}],"currentModelId":"grok-build"},"sessionId":"` + sessionIDOf(t, before) + `"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the handshake's answers:\n got %q\nwant %q", got, want)
	}
	metas := 0
	for i := range before {
		b, _ := json.Marshal(before[i])
		a, _ := json.Marshal(after[i])
		if bytes.Contains(a, []byte(`"_meta"`)) {
			t.Errorf("line %d keeps a _meta: %s", i+1, a)
		}
		if bytes.Contains(b, []byte(`"_meta"`)) {
			metas++
		}
		if before[i]["type"] == "expect_outbound" && !bytes.Equal(a, b) {
			t.Errorf("line %d, what the client sends, changed:\n%s\n%s", i+1, b, a)
		}
	}
	if metas == 0 {
		t.Fatal("the transcript had no _meta to leave out: pick one that has")
	}
}

// sessionIDOf is the session id a transcript's session/new answer gives.
func sessionIDOf(t *testing.T, es []entry) string {
	var id string
	answers(es, func(method string, frame map[string]any) {
		if res, _ := frame["result"].(map[string]any); method == "session/new" && res != nil && id == "" {
			id, _ = res["sessionId"].(string)
		}
	})
	if id == "" {
		t.Fatal("no session/new answer")
	}
	return id
}
