package replay

import (
	"bufio"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/transcript"
)

const header = `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"1","scenario":"t","metadata":{"source":"authored"}}`

func decode(t *testing.T, lines ...string) *transcript.Transcript {
	t.Helper()
	return decodeUnder(t, header, lines...)
}

// decodeUnder decodes a transcript of a header and entry lines.
func decodeUnder(t *testing.T, header string, lines ...string) *transcript.Transcript {
	t.Helper()
	tr, err := transcript.Decode(strings.NewReader(strings.Join(append([]string{header}, lines...), "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The afterMs waits read the Config's clock, scaled by the speed: the peer
// parks on a timer of afterMs/speed and sends the frame when that much
// time has passed on the clock, not before.
func TestPacingReadsTheClock(t *testing.T) {
	tr := decode(t,
		`{"type":"emit_inbound","frame":{"n":1}}`,
		`{"type":"emit_inbound","frame":{"n":2},"afterMs":1000}`,
		`{"type":"emit_inbound","frame":{"n":3},"afterMs":500}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	clk := clock.NewFake(time.Unix(0, 0))
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), Config{Transcript: tr, Speed: 2, Clock: clk, In: inR, Out: outW})
		outW.Close()
	}()
	rd := bufio.NewReader(outR)
	frame := func(want string) {
		t.Helper()
		if l, err := rd.ReadString('\n'); err != nil || l != want+"\n" {
			t.Fatalf("frame %q %v, want %s", l, err, want)
		}
	}
	var pending [][]time.Duration
	parked := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := clk.WaitTimers(ctx, 1); err != nil {
			t.Fatalf("the peer is not waiting on the clock: %v", err)
		}
		pending = append(pending, clk.Pending())
	}
	frame(`{"n":1}`)
	parked()
	clk.Advance(499 * time.Millisecond)
	parked() // a millisecond short: still waiting
	clk.Advance(time.Millisecond)
	frame(`{"n":2}`)
	parked()
	if _, err := clk.AdvanceNext(t.Context()); err != nil {
		t.Fatal(err)
	}
	frame(`{"n":3}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := [][]time.Duration{{500 * time.Millisecond}, {time.Millisecond}, {250 * time.Millisecond}}
	if diff := cmp.Diff(want, pending); diff != "" {
		t.Errorf("the timers the peer waited on (-want +got):\n%s", diff)
	}
}

// speeds draws a speed: often an edge (0, tiny, huge, 1), else any finite
// positive number.
func speeds() *rapid.Generator[float64] {
	return rapid.OneOf(
		rapid.SampledFrom([]float64{0, 1, 0.5, 2, 1e-300, math.SmallestNonzeroFloat64, 1e300, math.MaxFloat64}),
		rapid.Float64Range(0, 1e6),
	)
}

func afterMs() *rapid.Generator[int] {
	return rapid.OneOf(
		rapid.SampledFrom([]int{0, 1, -1, math.MaxInt, math.MinInt}),
		rapid.IntRange(-1000, 1<<40),
	)
}

// Delay is afterMs/speed milliseconds: never negative, none at speed 0 or
// for afterMs 0 or less, monotonic in afterMs (more never waits less) and
// in speed (faster never waits longer), and exact where it fits (speed 1
// is real time to the nanosecond up to 2^33 ms, where float64 is exact).
func TestDelayProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a1, a2 := afterMs().Draw(t, "a1"), afterMs().Draw(t, "a2")
		s1, s2 := speeds().Draw(t, "s1"), speeds().Draw(t, "s2")
		if a1 > a2 {
			a1, a2 = a2, a1
		}
		if s1 > s2 {
			s1, s2 = s2, s1
		}
		d := Delay(a1, s1)
		if d < 0 {
			t.Fatalf("Delay(%d, %v) = %v: negative", a1, s1, d)
		}
		if (a1 <= 0 || s1 == 0) && d != 0 {
			t.Fatalf("Delay(%d, %v) = %v, want none", a1, s1, d)
		}
		if d2 := Delay(a2, s1); d2 < d {
			t.Fatalf("Delay(%d, %v) = %v < Delay(%d, %v) = %v: a longer afterMs waits less", a2, s1, d2, a1, s1, d)
		}
		if s1 > 0 {
			if d2 := Delay(a1, s2); d2 > d {
				t.Fatalf("Delay(%d, %v) = %v > Delay(%d, %v) = %v: a faster speed waits longer", a1, s2, d2, a1, s1, d)
			}
		}
		if a1 > 0 && s1 > 0 {
			exact := float64(a1) * float64(time.Millisecond) / s1
			switch {
			case exact >= math.MaxInt64:
				if d != math.MaxInt64 {
					t.Fatalf("Delay(%d, %v) = %v, want the longest duration", a1, s1, d)
				}
			case math.Abs(float64(d)-exact) > math.Max(1, exact*1e-15):
				t.Fatalf("Delay(%d, %v) = %v, want %v ns", a1, s1, d, exact)
			}
		}
		if a1 >= 0 && a1 <= 1<<33 && Delay(a1, 1) != time.Duration(a1)*time.Millisecond {
			t.Fatalf("Delay(%d, 1) = %v: speed 1 is real time", a1, Delay(a1, 1))
		}
	})
}

// A speed is a finite number, 0 or more; anything else is refused.
func TestCheckSpeed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.0, -1e-300})).Draw(t, "speed")
		ok := CheckSpeed(s) == nil
		if want := !math.IsNaN(s) && !math.IsInf(s, 0) && s >= 0; ok != want {
			t.Fatalf("CheckSpeed(%v) accepts: %v, want %v", s, ok, want)
		}
	})
}

// A peer whose --speed is not a finite number, 0 or more, is bad usage.
func TestMainRefusesABadSpeed(t *testing.T) {
	for _, s := range []string{"-1", "NaN", "Inf", "-Inf"} {
		var stderr strings.Builder
		code := Main([]string{"--transcript", "x.ndjson", "--speed", s}, strings.NewReader(""), io.Discard, &stderr)
		if code != ExitBadUsage || !strings.Contains(stderr.String(), "--speed") {
			t.Errorf("--speed %s: exit %d, %q; want %d naming --speed", s, code, stderr.String(), ExitBadUsage)
		}
	}
}

// gatedReader is the client's end of the peer's stdin: each Read says on
// reads that the peer's reader is reading again, so every frame it read
// before is stamped and queued.
type gatedReader struct {
	r     io.Reader
	reads chan struct{}
}

func (g gatedReader) Read(b []byte) (int, error) {
	g.reads <- struct{}{}
	return g.r.Read(b)
}

// gatedWriter holds each Write until the test releases it, after saying on
// entered that it was called.
type gatedWriter struct{ entered, release chan struct{} }

func (g gatedWriter) Write(b []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	return len(b), nil
}

var pipelined = []string{
	`{"type":"expect_outbound","label":"a","frame":{"id":1,"method":"a"}}`,
	`{"type":"emit_inbound","label":"answer","frame":{"id":1,"result":"a"}}`,
	`{"type":"expect_outbound","label":"b","frame":{"id":2,"method":"b"}}`,
	`{"type":"runtime_exit","status":"success","wait":"now"}`,
}

// A frame that arrives once the frame before it was taken is not early for
// the entries the peer sends at once in answer to that one, even if it is
// there before they are sent: they are due at the same instant.
func TestFrameAfterItsPredecessorIsNotEarly(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	in := gatedReader{inR, make(chan struct{}, 8)}
	trace := gatedWriter{make(chan struct{}, 8), make(chan struct{})}
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), Config{Transcript: decode(t, pipelined...), In: in, Out: &out, Trace: trace})
	}()
	<-in.reads
	io.WriteString(inW, `{"id":1,"method":"a"}`+"\n")
	<-in.reads
	<-trace.entered // "a" taken: the peer is at its next instant, held before its answer
	io.WriteString(inW, `{"id":2,"method":"b"}`+"\n")
	<-in.reads // "b" is stamped and queued
	close(trace.release)
	if err := <-done; err != nil {
		t.Fatalf("a frame sent after the one before it was taken: %v", err)
	}
	if out.String() != `{"id":1,"result":"a"}`+"\n" {
		t.Errorf("stdout %q", out.String())
	}
}

// A frame the client sends right behind a request, where the transcript
// has the provider answer the request in between, is early: it arrived
// before the request was taken. Right behind a notification, which gets no
// answer, it is not: the client had nothing to wait for.
func TestPipelinedFrame(t *testing.T) {
	notified := append([]string{`{"type":"expect_outbound","label":"a","frame":{"method":"a"}}`}, pipelined[1:]...)
	for name, tc := range map[string]struct {
		lines []string
		first string
		want  string
	}{
		"behind a request": {pipelined, `{"id":1,"method":"a"}`,
			`mismatch at entry 3 (line 4, expect_outbound "b"): sent too early: the frame arrived before entry 2 (line 3, emit_inbound "answer") was sent`},
		"behind a notification": {notified, `{"method":"a"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "cursor")
			if err := syscall.Mkfifo(state, 0o600); err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			defer inW.Close()
			in := gatedReader{inR, make(chan struct{}, 8)}
			var out strings.Builder
			done := make(chan error, 1)
			go func() {
				// The peer opens its state file first, a FIFO: it waits
				// there until the test writes it.
				done <- Run(t.Context(), Config{Transcript: decode(t, tc.lines...), In: in, Out: &out, StateFile: state})
			}()
			<-in.reads
			io.WriteString(inW, tc.first+"\n"+`{"id":2,"method":"b"}`+"\n")
			<-in.reads // both are stamped and queued before the peer took either
			if err := os.WriteFile(state, []byte(`{"cursor":0}`), 0o600); err != nil {
				t.Fatal(err)
			}
			err := <-done
			if tc.want == "" {
				if err != nil || out.String() != `{"id":1,"result":"a"}`+"\n" {
					t.Fatalf("Run = %v, stdout %q; want the transcript played", err, out.String())
				}
				return
			}
			if ExitCode(err) != ExitMismatch || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want %q", err, tc.want)
			}
			if out.String() != "" {
				t.Errorf("stdout %q: the answer went out", out.String())
			}
		})
	}
}
