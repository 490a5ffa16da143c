package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rawFrameLogs lists DATA/rawframes.
func rawFrameLogs(t *testing.T, data string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(data, "rawframes"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// eventTypes is the type of each event `baton run --json` printed, but
// attempt.dispatched: whether that is recorded depends on a race (the
// turn's first events against the plugin's answer to StartTurn).
func eventTypes(t *testing.T, out string) []string {
	t.Helper()
	var types []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l struct{ Kind, Type string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, sc.Text())
		}
		if l.Kind == "event" && l.Type != "attempt.dispatched" {
			types = append(types, l.Type)
		}
	}
	return types
}

// --raw-frames off (or BATON_RAW_FRAMES=off), embedded or in baton serve,
// keeps no raw frames, and the run's events are the same as with them.
func TestRawFramesOff(t *testing.T) {
	msgs := lines(t, "acp/simple.messages")
	runJSON := func(t *testing.T, env []string, data string, flags ...string) []string {
		t.Helper()
		args := append(append([]string{"run", "--json", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
			"--provider-command", peerCommand(t, "acp/simple.ndjson")}, flags...), msgs...)
		out, errOut, code := batonEnv(t, env, "", args...)
		if code != exitOK {
			t.Fatalf("baton %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return eventTypes(t, out)
	}
	onData := t.TempDir()
	want := runJSON(t, nil, onData)
	if logs := rawFrameLogs(t, onData); len(logs) != 1 || !strings.HasSuffix(logs[0], ".ndjson") {
		t.Fatalf("with raw frames on, DATA/rawframes holds %v; want the session's log", logs)
	}
	for _, c := range []struct {
		name  string
		env   []string
		flags []string
		serve bool
	}{
		{name: "flag", flags: []string{"--raw-frames", "off"}},
		{name: "environment", env: []string{"BATON_RAW_FRAMES=off"}},
		{name: "serve", serve: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			if c.serve {
				startServe(t, data, "--raw-frames", "off")
			}
			got := runJSON(t, c.env, data, c.flags...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event types with raw frames off (-on +off):\n%s", diff)
			}
			if diff := cmp.Diff([]string{}, rawFrameLogs(t, data)); diff != "" {
				t.Errorf("DATA/rawframes with raw frames off (-want +got):\n%s", diff)
			}
		})
	}
}

// The retention flags and their variables bound the logs the host a
// command embeds keeps; bad values are refused naming the flag.
func TestRawFramesRetentionFlags(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "rawframes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for name, age := range map[string]time.Duration{"ses_a.ndjson": 30 * 24 * time.Hour, "ses_b.ndjson": 48 * time.Hour, "ses_c.ndjson": time.Hour} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 2000)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, []string{"--raw-frames-max-age", "none", "--raw-frames-max-bytes", "none"}, []string{"ses_a.ndjson", "ses_b.ndjson", "ses_c.ndjson"}},
		{[]string{"BATON_RAW_FRAMES_MAX_BYTES=5KiB", "BATON_RAW_FRAMES_MAX_AGE=none"}, nil, []string{"ses_b.ndjson", "ses_c.ndjson"}},
		{nil, []string{"--raw-frames-max-age", "36h"}, []string{"ses_c.ndjson"}},
		{nil, nil, []string{"ses_c.ndjson"}},
	} {
		out, errOut, code := batonEnv(t, append(c.env, "BATON_DATA="+data), "", append([]string{"threads"}, c.args...)...)
		if code != exitOK {
			t.Fatalf("baton threads %v: exit %d\n%s\n%s", c.args, code, out, errOut)
		}
		if diff := cmp.Diff(c.want, rawFrameLogs(t, data)); diff != "" {
			t.Errorf("raw-frame logs after baton threads %v %v (-want +got):\n%s", c.env, c.args, diff)
		}
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--raw-frames", "maybe"}, `threads: --raw-frames "maybe": give on or off, not "maybe"`},
		{nil, []string{"--raw-frames-max-bytes", "0"}, `size "0" out of range: give at least 1 byte, or none (to keep no raw frames: --raw-frames off)`},
		{[]string{"BATON_RAW_FRAMES_MAX_AGE=soon"}, nil, `threads: BATON_RAW_FRAMES_MAX_AGE="soon" (for --raw-frames-max-age): "soon" is not an age: give days (14d), a duration (36h), or none`},
	} {
		_, errOut, code := batonEnv(t, append(c.env, "BATON_DATA="+data), "", append([]string{"threads"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("baton threads %v %v: exit %d, %s; want exit 2 saying %s", c.env, c.args, code, errOut, c.want)
		}
	}
	out, _, _ := baton(t, "run", "--help")
	for _, want := range []string{"--raw-frames on|off", "wire traffic is lost", "[$BATON_RAW_FRAMES]", "--raw-frames-max-bytes size",
		"(default 256MiB)", "--raw-frames-max-age age", "(default 14d)", "[$BATON_RAW_FRAMES_MAX_AGE]"} {
		if !strings.Contains(out, want) {
			t.Errorf("baton run --help lacks %q:\n%s", want, out)
		}
	}
}
