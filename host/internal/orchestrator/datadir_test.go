//go:build unix

package orchestrator_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// CheckDataDir names who other than its owner may reach the data dir, and
// how.
func TestCheckDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range []os.FileMode{0o700, 0o500, 0o755, 0o750, 0o777, 0o770, 0o702, 0o741, 0o705, 0o701} {
		if err := os.Chmod(dir, m); err != nil {
			t.Fatal(err)
		}
		got[m.String()] = errText(orchestrator.CheckDataDir(dir))
	}
	os.Chmod(dir, 0o700)
	got["a file"] = errText(orchestrator.CheckDataDir(file))
	got["missing"] = errText(orchestrator.CheckDataDir(filepath.Join(dir, "nope")))
	d := "data dir " + dir + " is "
	want := map[string]string{
		"-rwx------": "",
		"-r-x------": "",
		"-rwxr-xr-x": d + "readable and searchable by its group and others (mode 0755)",
		"-rwxr-x---": d + "readable and searchable by its group (mode 0750)",
		"-rwxrwxrwx": d + "readable, writable and searchable by its group and others (mode 0777)",
		"-rwxrwx---": d + "readable, writable and searchable by its group (mode 0770)",
		"-rwx----w-": d + "writable by others (mode 0702)",
		"-rwxr----x": d + "readable by its group and searchable by others (mode 0741)",
		"-rwx---r-x": d + "readable and searchable by others (mode 0705)",
		"-rwx-----x": d + "searchable by others (mode 0701)",
		"a file":     "data dir " + file + " is not a directory",
		"missing":    "data dir: stat " + filepath.Join(dir, "nope") + ": no such file or directory",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckDataDir by mode (-want +got):\n%s", diff)
	}
}

// A host records itself in the data dir's pid file (0600) while it holds
// the data dir, and removes it as it closes; the raw-frame logs' directory
// an older Baton made 0755 is made private.
func TestPIDFile(t *testing.T) {
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, "rawframes"), 0o755); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, Command: "baton run", Clock: clock.NewFake(at)})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(data, orchestrator.PIDFileName)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	want := map[string]any{"pid": float64(os.Getpid()), "command": "baton run", "started": "2026-01-02T03:04:05Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pid file (-want +got):\n%s", diff)
	}
	modes := map[string]os.FileMode{}
	for _, p := range []string{pidFile, filepath.Join(data, "rawframes")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		modes[filepath.Base(p)] = fi.Mode().Perm()
	}
	if diff := cmp.Diff(map[string]os.FileMode{orchestrator.PIDFileName: 0o600, "rawframes": 0o700}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after close, the pid file: %v; want it gone", err)
	}
}

// A data dir another process holds is refused with a BusyError naming that
// process from its pid file; once that process is killed, the pid file it
// left misleads no one: the next host takes the data dir and rewrites it.
func TestDataDirHeldByAnotherProcess(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_CRASH_HELPER="+data, "BATON_CRASH_WS="+ws, "BATON_CRASH_ROUND=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if !bufio.NewScanner(out).Scan() { // its first commit: it holds the data dir
		t.Fatal("the helper committed nothing")
	}
	_, err = orchestrator.Open(orchestrator.Config{DataDir: data})
	var busy *orchestrator.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("open a data dir another process holds: %v; want a BusyError", err)
	}
	gotBusy := *busy
	gotBusy.Err = nil // the lock's refusal, checked above
	if diff := cmp.Diff(orchestrator.BusyError{DataDir: data, PID: cmd.Process.Pid}, gotBusy); diff != "" {
		t.Errorf("BusyError (-want +got):\n%s", diff)
	}
	if want := "another Baton process (pid " + strconv.Itoa(cmd.Process.Pid) + ") holds the data dir " + data; err.Error() != want {
		t.Errorf("error %q\n want %q", err, want)
	}

	cmd.Process.Kill()
	cmd.Wait()
	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, Command: "baton serve"})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	defer h.Close()
	b, _ := os.ReadFile(filepath.Join(data, orchestrator.PIDFileName))
	var got struct {
		PID     int    `json:"pid"`
		Command string `json:"command"`
	}
	json.Unmarshal(b, &got)
	if got.PID != os.Getpid() || got.Command != "baton serve" {
		t.Errorf("pid file after the killed holder's: %s; want this process's", b)
	}
}

// A host that cannot set up its data dir once it holds it (the pid file,
// the raw-frame logs' directory) fails to open saying why, and lets the
// data dir go: the next host opens it.
func TestOpenFailsOnADataDirItCannotSetUp(t *testing.T) {
	got := map[string]string{}
	for _, tc := range []struct{ name, path string }{
		{"rawframes a file", "rawframes"},
		{"a directory where the pid file's temporary goes", orchestrator.PIDFileName + ".tmp/x"},
		{"a directory where the pid file goes", orchestrator.PIDFileName + "/x"},
	} {
		data := t.TempDir()
		p := filepath.Join(data, tc.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := orchestrator.Open(orchestrator.Config{DataDir: data})
		got[tc.name] = strings.ReplaceAll(errText(err), data, "DATA")
		if err := os.RemoveAll(filepath.Join(data, strings.Split(tc.path, "/")[0])); err != nil {
			t.Fatal(err)
		}
		h, err := orchestrator.Open(orchestrator.Config{DataDir: data})
		if err != nil {
			t.Fatalf("%s: open once mended: %v", tc.name, err)
		}
		h.Close()
	}
	want := map[string]string{
		"rawframes a file": "open host: mkdir DATA/rawframes: not a directory",
		"a directory where the pid file's temporary goes": "open host: write pid file: remove DATA/baton.pid.tmp: directory not empty",
		"a directory where the pid file goes":             "open host: write pid file: rename DATA/baton.pid.tmp DATA/baton.pid: file exists",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("open (-want +got):\n%s", diff)
	}
	if got, want := (&orchestrator.BusyError{DataDir: "/d"}).Error(), "another Baton process holds the data dir /d"; got != want {
		t.Errorf("BusyError without a pid file: %q, want %q", got, want)
	}
}
