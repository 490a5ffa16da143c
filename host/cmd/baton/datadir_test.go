//go:build linux

package main

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// batonUmask runs baton under a umask (set by sh, then exec'd).
func batonUmask(t *testing.T, umask string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := "umask " + umask + "; exec '" + filepath.Join(binDir, "baton") + "' " + strings.Join(quoted, " ")
	cmd := exec.Command("sh", "-c", script)
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

// privateDir is a temp dir only its owner may reach, as a data dir should
// be (t.TempDir's are 0755 under the usual umask).
func privateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// notPrivate lists what under dir is not 0600 (a file) or 0700 (a
// directory), but dir itself.
func notPrivate(t *testing.T, dir string) map[string]string {
	t.Helper()
	open := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			rel, _ := filepath.Rel(dir, p)
			open[rel] = fi.Mode().Perm().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// Everything baton writes in the data dir is its owner's alone, whatever
// the umask: into a data dir that was there with mode 0755 (which baton
// run warns of, once, and baton serve refuses), and into one it makes,
// with the parents it lacked.
func TestDataDirIsPrivate(t *testing.T) {
	run := func(data string) (string, string, int) {
		return batonUmask(t, "000", "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
			"--provider-command", peerCommand(t, "acp/simple.ndjson"), "Say hello.")
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(data, 0o755)
	out, stderr, code := run(data)
	if code != 0 || !strings.Contains(out, "✔ run 1 completed") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
	}
	want := "baton: warning: data dir " + data + " is readable and searchable by its group and others (mode 0755), and it holds your threads' messages: chmod 700 " + data + "\n"
	if stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
	if diff := cmp.Diff(map[string]string{}, notPrivate(t, data)); diff != "" {
		t.Errorf("in a data dir that was 0755, what others may reach (-want +got):\n%s", diff)
	}
	_, stderr, code = batonUmask(t, "000", "serve", "--data", data)
	want = "baton: serve: data dir " + data + " is readable and searchable by its group and others (mode 0755); refusing to serve from it: chmod 700 " + data + "\n"
	if code != 1 || stderr != want {
		t.Errorf("serve on a 0755 data dir: exit %d\n%s\nwant exit 1\n%s", code, stderr, want)
	}

	top := filepath.Join(t.TempDir(), "home")
	data = filepath.Join(top, "share", "baton")
	if out, stderr, code := run(data); code != 0 || stderr != "" {
		t.Fatalf("run into a new data dir: exit %d\n%s\n%s", code, out, stderr)
	}
	if diff := cmp.Diff(map[string]string{}, notPrivate(t, filepath.Dir(top))); diff != "" {
		t.Errorf("in a data dir baton made, what others may reach (-want +got):\n%s", diff)
	}
}

// A second baton that writes to a data dir a run holds says which process
// holds it (from the pid file) and what to do; once that process is
// killed, the pid file it left is no obstacle. (One that only reads reads
// it read-only: readonly_test.go.)
func TestDataDirHeld(t *testing.T) {
	data, ws := privateDir(t), t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", data, "--cwd", ws, "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/stall.ndjson"), "Take your time")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"type":"run.started"`) {
				close(started)
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the run never started")
	}
	out, stderr, code := baton(t, "send", "--data", data, "thr_any", "more")
	want := "baton: another Baton process (pid " + strconv.Itoa(cmd.Process.Pid) + ", `baton run`) holds the data dir " + data +
		"; wait for it, or run `baton serve` so every baton command shares the data dir\n"
	if code != 1 || stderr != want {
		t.Errorf("a second baton: exit %d\n%s%s\nwant exit 1\n%s", code, out, stderr, want)
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(data, "baton.pid")); err != nil {
		t.Fatalf("the killed run's pid file: %v", err)
	}
	if out, stderr, code := baton(t, "threads", "--data", data); code != 0 {
		t.Errorf("after the holder was killed: exit %d\n%s%s", code, out, stderr)
	}
}

// A thread is refused a --cwd that does not exist or is not a directory,
// before anything is written; a thread whose directory was removed fails
// its next run naming the directory, not with the provider's start.
func TestCwdChecked(t *testing.T) {
	data, ws := privateDir(t), t.TempDir()
	file := filepath.Join(ws, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cwd := range []string{filepath.Join(ws, "nope"), file} {
		_, stderr, code := baton(t, "run", "--data", data, "--cwd", cwd, "--provider", "acp",
			"--provider-command", peerCommand(t, "acp/simple.ndjson"), "Say hello.")
		got[cwd] = strconv.Itoa(code) + " " + stderr
	}
	want := map[string]string{
		filepath.Join(ws, "nope"): "2 baton: invalid command: cwd " + filepath.Join(ws, "nope") + " does not exist; give a directory that exists\n",
		file:                      "2 baton: invalid command: cwd " + file + " is not a directory; give a directory that exists\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run --cwd (-want +got):\n%s", diff)
	}
	if out, stderr, code := baton(t, "threads", "--data", data, "--json"); code != 0 || out != "" {
		t.Errorf("threads after the refusals: exit %d\n%s%s\nwant none", code, out, stderr)
	}

	gone := filepath.Join(ws, "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := baton(t, "run", "--data", data, "--cwd", gone, "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/simple.ndjson"), "Say hello.")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	threadID := threadOf(t, out)
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = baton(t, "run", "--data", data, "--thread", threadID, "Say hello again.")
	want2 := "✖ run 2 failed: the thread's working directory " + gone + " does not exist; restore it to go on with this thread, or start a new thread\n"
	if code != 1 || !strings.Contains(out, want2) || strings.Contains(out+stderr, "fork/exec") {
		t.Errorf("continue in a removed directory: exit %d\n%s%s\nwant exit 1 and\n%s", code, out, stderr, want2)
	}
}
