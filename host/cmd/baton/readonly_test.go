//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/service"
)

// A data dir baton cannot hold can still be read: threads, show and
// doctor's check open its store read-only, whether another process holds
// it or it cannot be written; what writes refuses as before.

// dataDirState is every file and directory under a data dir: its mode,
// size, modification time and, for a file, its bytes, to tell that nothing
// was written.
func dataDirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%v %d %v", fi.Mode(), fi.Size(), fi.ModTime())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] += " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// project is the projection of the events of one thread, each applied as
// the host applies it.
func project(t *testing.T, recs []eventlog.Record) domain.Thread {
	t.Helper()
	var th domain.Thread
	for _, r := range recs {
		pl, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			t.Fatalf("event %d: %v", r.Sequence, err)
		}
		domain.Evolve(&th, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: pl})
	}
	return th
}

// asJSON is a value as its JSON decodes to plain values, to compare a
// projection whole.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// withoutEmpty is a JSON value without the object fields whose value is
// null or an empty list, at any depth.
func withoutEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if l, isList := e.([]any); e == nil || isList && len(l) == 0 {
				continue
			}
			out[k] = withoutEmpty(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutEmpty(e)
		}
		return out
	}
	return v
}

// stalledRun starts `baton run --json` on a data dir with a provider that
// takes the turn and never ends it, and returns once the host has
// committed everything it will (the provider's thinking): the process, and
// the events it streamed.
func stalledRun(t *testing.T, data string) (*exec.Cmd, []eventlog.Record) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/stall.ndjson"), "Take your time")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	got := make(chan []eventlog.Record, 1)
	go func() {
		var recs []eventlog.Record
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			l, err := readPrinted(sc.Bytes())
			r := l.Record
			if err == nil && r.Type != "" {
				recs = append(recs, r)
			}
			if r.Type == "node.delta" { // the thinking: the stall's last frame
				got <- recs
				break
			}
		}
		io.Copy(io.Discard, stdout)
		close(got)
	}()
	select {
	case recs, ok := <-got:
		if !ok {
			t.Fatal("the stalled run ended before the provider's thinking")
		}
		return cmd, recs
	case <-time.After(60 * time.Second):
		t.Fatal("the stalled run never reached the provider's thinking")
		return nil, nil
	}
}

// While a `baton run` holds the data dir, threads, show and doctor read it
// read-only and say so; nothing under the data dir changes; a verb that
// writes (send) and doctor --rebuild refuse as before, naming the holder.
func TestReadsOfAHeldDataDir(t *testing.T) {
	data := privateDir(t)
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/simple.ndjson"), "Say hello.")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	done := threadOf(t, out)
	out, _, _ = baton(t, "threads", "--json", "--data", data)
	before := threadsJSON(t, out)

	holder, recs := stalledRun(t, data)
	// Frozen, it holds the data dir and writes nothing more (an outbox
	// entry it was settling may be half in its log), so that what changes
	// is the readers' doing.
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	held := recs[0].ThreadID
	want := project(t, recs)
	busy := "baton: another Baton process (pid " + strconv.Itoa(holder.Process.Pid) + ", `baton run`) holds the data dir " + data
	state := dataDirState(t, data)

	type result struct {
		Stdout, Stderr string
		Code           int
	}
	run := func(args ...string) result {
		out, errOut, code := baton(t, append(args, "--data", data)...)
		return result{out, errOut, code}
	}
	got := run("threads", "--json")
	list := threadsJSON(t, got.Stdout)
	got.Stdout = ""
	if diff := cmp.Diff(result{Stderr: busy + "; reading it read-only, as it stands now\n"}, got); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	sum := want.Summary()
	sum.Sequence = 0
	wantList := append(before, sum)
	slices.SortFunc(wantList, func(a, b domain.ThreadSummary) int { // in the order baton threads lists them
		return listOrder(service.SummaryMessage(a), service.SummaryMessage(b))
	})
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("threads --json: the list (-want +got):\n%s", diff)
	}

	got = run("show", "--json", held)
	shownThread, err := readThreadJSON([]byte(got.Stdout))
	if err != nil {
		t.Fatalf("show --json: %v\n%+v", err, got)
	}
	shown := asJSON(t, shownThread)
	got.Stdout = ""
	if diff := cmp.Diff(result{Stderr: busy + "; reading it read-only, as it stands now\n"}, got); diff != "" {
		t.Errorf("show (-want +got):\n%s", diff)
	}
	// The API carries no difference between a list that is empty and one
	// that is not there.
	if diff := cmp.Diff(withoutEmpty(asJSON(t, want)), withoutEmpty(shown)); diff != "" {
		t.Errorf("show --json: the projection (-the run's events +shown):\n%s", diff)
	}
	if got := run("show", done); got.Code != exitOK || !strings.HasPrefix(got.Stdout, "thread "+done+" · acp · ") {
		t.Errorf("show of the thread that ended: %+v", got)
	}

	last := recs[len(recs)-1].Sequence
	got = run("doctor")
	if diff := cmp.Diff(result{
		Stdout: fmt.Sprintf("the event store %s is healthy: %d events (last sequence %d), 2 threads\n", filepath.Join(data, "events"), last, last),
		Stderr: busy + "; its event store is checked read-only, as it stands now\n"}, got); diff != "" {
		t.Errorf("doctor (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(state, dataDirState(t, data)); diff != "" {
		t.Errorf("the data dir changed as it was read (-before +after):\n%s", diff)
	}

	// What writes refuses, naming the holder (having tried its lock).
	checks := []struct {
		args []string
		want result
	}{
		{[]string{"doctor", "--rebuild"}, result{Stderr: busy + "; stop it, then run doctor again\n", Code: exitFailed}},
		{[]string{"send", held, "more"}, result{Code: exitFailed,
			Stderr: busy + "; wait for it, or run `baton serve` so every baton command shares the data dir\n"}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, run(c.args...)); diff != "" {
			t.Errorf("baton %s (-want +got):\n%s", strings.Join(c.args, " "), diff)
		}
	}
}

// readOnlyMount is the script that runs a command with the data dir ($0)
// a read-only bind mount of itself, in a mount namespace of its own.
const readOnlyMount = `mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"`

// batonOnReadOnlyFS runs baton with the data dir on a read-only file
// system (a read-only bind mount in a user and mount namespace of the
// command's own, so that it works for root too, whom file modes do not
// stop), or skips the test where no such namespace can be made.
func batonOnReadOnlyFS(t *testing.T, data string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	probe := exec.Command("unshare", "-rm", "sh", "-c", readOnlyMount, data, "sh", "-c", `! touch "$0/probe" 2>/dev/null`, data)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("no read-only mount of the data dir can be made here (unshare -rm, mount --bind): %v %s", err, out)
	}
	cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", readOnlyMount, data, filepath.Join(binDir, "baton")}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// A data dir on a read-only file system is read: threads, show and doctor
// answer as they do on a writable one, saying it is read read-only; what
// writes (send, doctor --rebuild) refuses, saying why.
func TestReadsOfAReadOnlyDataDir(t *testing.T) {
	data := privateDir(t)
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/simple.ndjson"), "Say hello.")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	thread := threadOf(t, out)
	type result struct {
		Stdout, Stderr string
		Code           int
	}
	reads := [][]string{{"threads", "--json"}, {"show", "--json", thread}, {"show", thread}, {"doctor"}}
	want := map[string]result{}
	for _, args := range reads {
		out, errOut, code := baton(t, append(args, "--data", data)...)
		if code != exitOK || errOut != "" {
			t.Fatalf("baton %s on the writable data dir: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		want[strings.Join(args, " ")] = result{Stdout: out}
	}
	note := "baton: the data dir " + data + " is on a read-only file system; reading it read-only\n"
	for _, args := range reads[:3] {
		w := want[strings.Join(args, " ")]
		w.Stderr = note
		want[strings.Join(args, " ")] = w
	}
	want["doctor --rebuild"] = result{Code: exitFailed,
		Stderr: "baton: doctor --rebuild: the data dir " + data + " is on a read-only file system, and a rebuild writes a new store beside the damaged one\n"}
	want["send "+thread+" more"] = result{Code: exitFailed,
		Stderr: "baton: open host: open event log " + filepath.Join(data, "events") + ": open " + filepath.Join(data, "events", "LOCK") + ": read-only file system\n"}

	got := map[string]result{}
	for _, args := range append(reads, []string{"doctor", "--rebuild"}, []string{"send", thread, "more"}) {
		out, errOut, code := batonOnReadOnlyFS(t, data, append(args, "--data", data)...)
		got[strings.Join(args, " ")] = result{out, errOut, code}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("on a read-only file system (-as on a writable one +got):\n%s", diff)
	}
}
