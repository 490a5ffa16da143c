package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/pluginclient"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// BenchmarkRun measures one simple run end to end: dispatch, a new provider
// session (the replay peer process), the turn through the real plugin, every
// event committed with fsync, and the projection. Its baseline,
// BenchmarkPluginOnly, drives the same plugin and transcript with the sdk
// client alone: the difference is what the host adds.
func BenchmarkRun(b *testing.B) {
	h, err := orchestrator.Open(orchestrator.Config{DataDir: b.TempDir(), PluginDirs: []string{pluginDir},
		Logger: hclog.NewNullLogger(), IDs: ids.Seeded(1)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	transcript, msg := simpleScenario(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		rc, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("create-%d", i), Payload: domain.CreateThread{
			Provider: "acp", Cwd: b.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}})
		if err != nil {
			b.Fatal(err)
		}
		_, seq, _ := h.Snapshot(rc.ThreadID)
		if _, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("send-%d", i), ThreadID: rc.ThreadID,
			Payload: domain.DispatchMessage{Text: msg}}); err != nil {
			b.Fatal(err)
		}
		for rec, err := range h.Events(ctx, seq) {
			if err != nil {
				b.Fatal(err)
			}
			if rec.ThreadID == rc.ThreadID && rec.Type == (domain.RunEnded{}).EventType() {
				break
			}
		}
	}
}

func BenchmarkPluginOnly(b *testing.B) {
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-acp")})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Kill()
	transcript, msg := simpleScenario(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("s%d", i)
		if _, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: b.TempDir(),
			Command: sdk.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: msg}}); err != nil {
			b.Fatal(err)
		}
		for ev, err := range p.Events(ctx, id, 0) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Kind == sdk.EventTurnTerminal {
				break
			}
		}
		if err := p.CloseSession(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// simpleScenario is the simple transcript's absolute path and its message.
func simpleScenario(b *testing.B) (transcript, message string) {
	transcript, err := filepath.Abs(filepath.Join(root, "testdata", "acp", "simple.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	return transcript, plugintest.ReadGroups(b, filepath.Join(root, "testdata", "acp", "simple.messages"))[0][0]
}

// BenchmarkPluginTurn measures one simple turn through each provider's
// plugin against its replay peer, with the sdk client alone: a new session
// (the peer process, and for opencode its HTTP server and event stream),
// the turn, and the close. The differences are the transports' own costs
// (JSON-RPC or stream-json on stdio, a process per turn, HTTP and SSE).
// plugin-RSS-MB is the plugin process's resident memory after its turns.
func BenchmarkPluginTurn(b *testing.B) {
	b.Setenv("BATON_REPLAYPEER", peerBin) // plugintest.PeerCommand's peer
	for _, provider := range []string{"acp", "codex", "claude", "cursor", "opencode"} {
		b.Run(provider, func(b *testing.B) {
			p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-"+provider)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Kill()
			transcript := filepath.Join(root, "testdata", provider, "simple.ndjson")
			msg := firstMessage(b, provider, "simple")
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("s%d", i)
				ws := b.TempDir()
				if _, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: ws,
					Command: plugintest.PeerCommand(transcript, ws, "")}); err != nil {
					b.Fatal(err)
				}
				if _, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: msg}}); err != nil {
					b.Fatal(err)
				}
				for ev, err := range p.Events(ctx, id, 0) {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Kind == sdk.EventTurnTerminal && ev.ParentThreadRef == "" {
						break
					}
				}
				if err := p.CloseSession(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			// The plugin process's resident set after its turns.
			b.ReportMetric(float64(orchestrator.ResidentKB(p.Pid()))/1024, "plugin-RSS-MB")
		})
	}
}

// firstMessage is the first message a scenario's client sends: the first
// line of SCENARIO.messages, or the first send of SCENARIO.steps.json.
func firstMessage(b *testing.B, provider, scenario string) string {
	dir := filepath.Join(root, "testdata", provider)
	if data, err := os.ReadFile(filepath.Join(dir, scenario+".steps.json")); err == nil {
		var s struct {
			Steps []struct {
				Send string `json:"send"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			b.Fatal(err)
		}
		for _, st := range s.Steps {
			if st.Send != "" {
				return st.Send
			}
		}
		b.Fatalf("%s/%s.steps.json sends nothing", provider, scenario)
	}
	return plugintest.ReadGroups(b, filepath.Join(dir, scenario+".messages"))[0][0]
}

// deltaTranscript writes the ACP long turn (deltaTranscriptOf).
func deltaTranscript(b *testing.B, n, pace int) string {
	return deltaTranscriptOf(b, testbin.ACPTurn, n, pace)
}

// deltaTranscriptOf writes a provider's long turn of n deltas, pace ms
// apart (0: at full speed): testbin.WriteLongTurn.
func deltaTranscriptOf(b *testing.B, turn testbin.LongTurn, n, pace int) string {
	b.Helper()
	name, err := testbin.WriteLongTurn(root, b.TempDir(), turn, n, pace)
	if err != nil {
		b.Fatal(err)
	}
	return name
}

// pipelineRun runs one turn of the transcript through a host and returns,
// for each delta text, when a subscriber of the thread's stream saw it,
// and the thread.
func pipelineRun(b *testing.B, h *orchestrator.Host, transcript string, speed string) (map[string]seenAt, domain.Thread) {
	st, err := streamRun(h, "acp", firstMessage(b, "acp", "simple"), transcript, speed, b.TempDir(), true, nil)
	if err != nil {
		b.Fatal(err)
	}
	return st.seen, st.thread
}

// throughputRun runs one long turn of n deltas (testbin.WriteLongTurn) at
// full speed and checks that the subscriber read its whole text, in order.
// The subscriber keeps the text, as a client showing it does, and no
// time per delta (pipelineRun's map cost the host's process a tenth of
// its CPU).
// It returns how many events carried the deltas.
func throughputRun(b *testing.B, h *orchestrator.Host, provider, transcript string, n int) int {
	st, err := streamRun(h, provider, firstMessage(b, provider, "simple"), transcript, "0", b.TempDir(), false, nil)
	if err != nil {
		b.Fatal(err)
	}
	if want := longText(n); st.text != want {
		b.Fatalf("the subscriber read %d bytes of text, want %d: %.80q...", len(st.text), len(want), st.text)
	}
	return st.events
}

// longText is a long turn's answer: "c1 c2 ... cn ".
func longText(n int) string {
	var w strings.Builder
	for i := range n {
		fmt.Fprintf(&w, "c%d ", i+1)
	}
	return w.String()
}

// seenAt is when a subscriber saw a delta, and when the host decided the
// event that carried it (the event's time, before its synced write).
type seenAt struct{ seen, decided time.Time }

// streamed is what a subscriber read of a turn (streamRun).
type streamed struct {
	seen   map[string]seenAt // with timed: when each delta text was read
	text   string            // the answer's text, the deltas in the order read
	events int               // the message.delta events that carried it
	thread domain.Thread     // the thread after the turn
}

// streamRun runs one turn of a provider's transcript in cwd through a host
// and returns the answer's text as a subscriber of the thread's stream
// read it and the thread, and with timed, for each delta text, when the
// subscriber saw it; first, if not nil, is called at the first delta.
func streamRun(h *orchestrator.Host, provider, msg, file, speed, cwd string, timed bool, first func()) (streamed, error) {
	ctx := context.Background()
	t, err := transcript.ReadFile(file)
	if err != nil {
		return streamed{}, err
	}
	argv := append([]string{peerBin, "--transcript", file, "--speed", speed}, replay.PeerArgs(t)...)
	rc, err := h.Dispatch(ctx, domain.Command{ID: "create-" + cwd, Payload: domain.CreateThread{
		Provider: provider, Cwd: cwd, ProviderCommand: domain.ProviderCommand{Argv: argv}}})
	if err != nil {
		return streamed{}, err
	}
	seen := map[string]seenAt{}
	var text strings.Builder
	deltaEvents := 0
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for rec, err := range h.ThreadStream(sctx, rc.ThreadID, 0) {
			if err != nil {
				done <- err
				return
			}
			switch rec.Type {
			case "message.delta":
				// Chunks that reached the host together are one event
				// (domain.Coalesce): each chunk's text is "cN ".
				var d domain.MessageDelta
				json.Unmarshal(rec.Data, &d)
				text.WriteString(d.Text)
				deltaEvents++
				if timed {
					now := time.Now()
					for c := range strings.FieldsSeq(d.Text) {
						seen[c+" "] = seenAt{now, rec.At}
					}
				}
				if first != nil {
					first()
					first = nil
				}
			case "run.ended":
				done <- nil
				return
			}
		}
		done <- errors.New("the stream ended before the run")
	}()
	if _, err := h.Dispatch(ctx, domain.Command{ID: "send-" + rc.ThreadID, ThreadID: rc.ThreadID, Payload: domain.DispatchMessage{Text: msg}}); err != nil {
		return streamed{}, err
	}
	if err := <-done; err != nil {
		return streamed{}, err
	}
	th, _ := h.Thread(rc.ThreadID)
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted {
		return streamed{}, fmt.Errorf("run %s: %+v", r.Status, r.Failure)
	}
	return streamed{seen, text.String(), deltaEvents, th}, nil
}

// BenchmarkReplayPipeline measures the whole pipeline on one ACP turn of
// many content deltas: the replay peer (the provider process) ->
// baton-plugin-acp over go-plugin (its normalizer) -> the host (ingest,
// commit to Pebble, publish) -> a subscriber of the thread's stream.
//
// "deltas=100000" plays 100,000 deltas at full speed; deltas/s is what the
// subscriber received per second, from the message's dispatch to the run's
// end; its baseline, "plugin-only", reads the same turn from the plugin
// with the sdk client alone. "paced" plays 3,000 deltas at 1,000 a second and reports the
// latency from each frame's arrival at the plugin (its raw-frame log's
// time) to the subscriber, at the median and the 99th percentile.
func BenchmarkReplayPipeline(b *testing.B) {
	newHost := func(b *testing.B) (*orchestrator.Host, string) {
		data := b.TempDir()
		h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{pluginDir}, Logger: hclog.NewNullLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		return h, data
	}
	b.Run("deltas=100000", func(b *testing.B) {
		const n = 100000
		transcript := deltaTranscript(b, n, 0)
		h, _ := newHost(b)
		var elapsed time.Duration
		events := 0
		for b.Loop() {
			start := time.Now()
			events += throughputRun(b, h, "acp", transcript, n)
			elapsed += time.Since(start)
		}
		b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "deltas/s")
		b.ReportMetric(float64(n*b.N)/float64(events), "deltas/event")
	})
	// The same for codex's and claude's frame shapes: codex's answer's
	// item/agentMessage/delta, claude's assistant message, 100,000 times.
	for _, turn := range []testbin.LongTurn{testbin.CodexTurn, testbin.ClaudeTurn} {
		b.Run(turn.Provider+"/deltas=100000", func(b *testing.B) {
			const n = 100000
			transcript := deltaTranscriptOf(b, turn, n, 0)
			h, _ := newHost(b)
			var elapsed time.Duration
			events := 0
			for b.Loop() {
				start := time.Now()
				events += throughputRun(b, h, turn.Provider, transcript, n)
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "deltas/s")
			b.ReportMetric(float64(n*b.N)/float64(events), "deltas/event")
		})
	}
	// The baseline: the same peer and plugin, the events read with the
	// sdk client alone, no host.
	b.Run("deltas=100000/plugin-only", func(b *testing.B) {
		const n = 100000
		transcript := deltaTranscript(b, n, 0)
		p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-acp")})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Kill()
		msg := plugintest.ReadGroups(b, filepath.Join(root, "testdata", "acp", "simple.messages"))[0][0]
		ctx := context.Background()
		var elapsed time.Duration
		i := 0
		for b.Loop() {
			i++
			id := fmt.Sprintf("s%d", i)
			start := time.Now()
			if _, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: b.TempDir(),
				Command: sdk.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}); err != nil {
				b.Fatal(err)
			}
			if _, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: msg}}); err != nil {
				b.Fatal(err)
			}
			deltas := 0
			for ev, err := range p.Events(ctx, id, 0) {
				if err != nil {
					b.Fatal(err)
				}
				if ev.Kind == sdk.EventContentDelta {
					deltas++
				}
				if ev.Kind == sdk.EventTurnTerminal {
					break
				}
			}
			elapsed += time.Since(start)
			if deltas != n {
				b.Fatalf("%d deltas, want %d", deltas, n)
			}
			p.CloseSession(ctx, id)
		}
		b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "deltas/s")
	})
	for _, busy := range []int{0, 50} {
		name := "paced"
		if busy > 0 {
			name = fmt.Sprintf("paced/busy=%d", busy)
		}
		b.Run(name, func(b *testing.B) { pacedLatency(b, newHost, busy) })
	}
}

// frameTimes reads a session's raw-frame log (and its rotated part): when
// the plugin read each answer chunk, by its text.
func frameTimes(b *testing.B, name string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, f := range []string{name + ".1", name} {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			var rec struct {
				T     time.Time `json:"t"`
				Dir   string    `json:"dir"`
				Frame struct {
					Params struct {
						Update struct {
							Content struct {
								Text string `json:"text"`
							} `json:"content"`
						} `json:"update"`
					} `json:"params"`
				} `json:"frame"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Dir == "in" && rec.Frame.Params.Update.Content.Text != "" {
				out[rec.Frame.Params.Update.Content.Text] = rec.T
			}
		}
	}
	return out
}

// pacedLatency plays 3,000 deltas at 1,000 a second through a host, while
// busy other threads each stream 100 deltas a second (each its own peer
// process, all through the one plugin), and reports the latency from each
// frame's arrival at the plugin (its raw-frame log's time) to the
// subscriber: the median, the 99th percentile and the most.
func pacedLatency(b *testing.B, newHost func(*testing.B) (*orchestrator.Host, string), busy int) {
	const n = 3000
	transcript := deltaTranscript(b, n, 1)
	// Each other thread streams for longer than the measured run: 500
	// deltas, 10 ms apart.
	background := deltaTranscript(b, 500, 10)
	msg := firstMessage(b, "acp", "simple")
	h, data := newHost(b)
	var lat, before []time.Duration
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, busy)
		var streaming sync.WaitGroup
		streaming.Add(busy)
		for range busy {
			cwd := b.TempDir()
			wg.Go(func() {
				once := sync.OnceFunc(streaming.Done)
				defer once() // a run that failed before its first delta
				if _, err := streamRun(h, "acp", msg, background, "1", cwd, false, once); err != nil {
					errs <- err
				}
			})
		}
		streaming.Wait() // every other thread streams
		seen, th := pipelineRun(b, h, transcript, "1")
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("a thread streaming beside: %v", err)
		}
		arrived := frameTimes(b, filepath.Join(data, "rawframes", th.ProviderSessions[0].ID+".ndjson"))
		for text, at := range seen {
			if in, ok := arrived[text]; ok {
				lat = append(lat, at.seen.Sub(in))
				before = append(before, at.decided.Sub(in))
			}
		}
	}
	if len(lat) < n*b.N {
		b.Fatalf("%d latencies, want %d", len(lat), n*b.N)
	}
	slices.Sort(lat)
	slices.Sort(before)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	// The part of the latency before the host decided the event: the
	// plugin, the stream to the host and the wait for the thread's turn.
	b.ReportMetric(float64(before[len(before)*99/100].Microseconds())/1000, "decided-p99-ms")
}
