//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/clock"
)

// madeThread is a thread a test made at a known instant.
type madeThread struct {
	id               string
	created, updated time.Time
	provider, cwd    string
	summary          domain.ThreadSummary
}

// makeThreads makes five threads in data on a host of this process whose
// clock is set to instants before now, far enough that their ages on a
// terminal hold for a while (the shortest, 2h, for half an hour):
//
//	a  thr_ffffffffffffffff (an id of the older form)  4d1h ago
//	b  a time-ordered id                               2d12h ago, switched to claude 5h30m ago
//	c  thr_0000000000000001                            2h30m ago
//	d  thr_00000000000000aa                            2h30m ago, the same instant
//	e  a time-ordered id                               2h30m ago, the same instant
//
// By id, a sorts last and c first; by creation, a is the oldest and c, d
// and e the newest, in that order among themselves by id.
func makeThreads(t *testing.T, data, ws string, now time.Time) map[string]*madeThread {
	t.Helper()
	clk := clock.NewFake(now.Add(-(4*24 + 1) * time.Hour))
	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{binDir}, Clock: clk, IDs: ids.Seeded(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	made := map[string]*madeThread{}
	n := 0
	create := func(name, id string) {
		n++
		rc, err := h.Dispatch(t.Context(), domain.Command{ID: fmt.Sprintf("create-%d", n), ThreadID: id,
			Payload: domain.CreateThread{Provider: "acp", Cwd: ws, ProviderCommand: domain.ProviderCommand{Argv: []string{"agent"}}}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		made[name] = &madeThread{id: rc.ThreadID, created: clk.Now(), updated: clk.Now(), provider: "acp", cwd: ws}
	}
	create("a", "thr_ffffffffffffffff")
	clk.Set(now.Add(-(2*24 + 12) * time.Hour))
	create("b", "")
	clk.Set(now.Add(-(5*time.Hour + 30*time.Minute)))
	if _, err := h.Dispatch(t.Context(), domain.Command{ID: "switch-b", ThreadID: made["b"].id,
		Payload: domain.SwitchProvider{Provider: "claude", ProviderCommand: domain.ProviderCommand{Argv: []string{"agent"}}}}); err != nil {
		t.Fatal(err)
	}
	made["b"].updated, made["b"].provider = clk.Now(), "claude"
	clk.Set(now.Add(-(2*time.Hour + 30*time.Minute)))
	create("c", "thr_0000000000000001")
	create("d", "thr_00000000000000aa")
	create("e", "")
	list, err := h.Threads("", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range made {
		for _, s := range list {
			if s.ID == m.id {
				m.summary = s
			}
		}
	}
	return made
}

// A new thread's id is thr_ and a ULID of the instant it was made, on the
// host's clock.
func TestNewThreadIDsHoldTheirCreationTime(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	now := time.Now()
	made := makeThreads(t, data, t.TempDir(), now)
	for _, name := range []string{"b", "e"} {
		m := made[name]
		if !timeIDRe.MatchString(m.id) {
			t.Fatalf("thread %s's id %q is not thr_ and 26 digits of lower-case base32", name, m.id)
		}
		if ms, want := ulidMillis(m.id[len("thr_"):]), m.created.UnixMilli(); ms != want {
			t.Errorf("thread %s's id %s holds the instant %d; it was made at %d", name, m.id, ms, want)
		}
	}
	if made["e"].id <= made["b"].id {
		t.Errorf("thread e (%s), made after b, does not sort after it (%s)", made["e"].id, made["b"].id)
	}
}

var timeIDRe = regexp.MustCompile(`^thr_[0-7][0-9a-hjkmnp-tv-z]{25}$`)

// ulidMillis decodes a ULID's first ten digits: the time, in Unix
// milliseconds.
func ulidMillis(id string) int64 {
	const digits = "0123456789abcdefghjkmnpqrstvwxyz"
	var ms int64
	for _, c := range id[:10] {
		ms = ms<<5 | int64(strings.IndexRune(digits, c))
	}
	return ms
}

// baton threads lists newest first, by creation time then id, whatever
// form the ids have, in the format -o (or --json) asks for, the same from
// an embedded host and from a service; a table's times are ages on a
// terminal and RFC 3339 instants elsewhere.
func TestThreadsOrderAndFormats(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	os.Chmod(data, 0o700)
	now := time.Now()
	made := makeThreads(t, data, ws, now)
	order := []string{"e", "d", "c", "b", "a"}
	ids := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(made[n].id + "\n")
		}
		return b.String()
	}
	var jsonLines strings.Builder
	for _, n := range order {
		b, _ := json.Marshal(made[n].summary)
		jsonLines.Write(append(b, '\n'))
	}
	// The table, each thread's times as when says them.
	table := func(when func(name string, m *madeThread) (created, updated string)) string {
		var b bytes.Buffer
		w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "THREAD\tPROVIDER\tSTATUS\tRUNS\tCREATED\tUPDATED\tCWD")
		for _, n := range order {
			m := made[n]
			created, updated := when(n, m)
			fmt.Fprintf(w, "%s\t%s\tidle\t0\t%s\t%s\t%s\n", m.id, m.provider, created, updated, m.cwd)
		}
		w.Flush()
		return b.String()
	}
	instants := table(func(_ string, m *madeThread) (string, string) {
		return m.created.UTC().Format(time.RFC3339), m.updated.UTC().Format(time.RFC3339)
	})
	// On a terminal: ages (b was made 2d12h ago and switched 5h30m ago).
	ages := map[string][2]string{"a": {"4d ago", "4d ago"}, "b": {"2d ago", "5h ago"},
		"c": {"2h ago", "2h ago"}, "d": {"2h ago", "2h ago"}, "e": {"2h ago", "2h ago"}}
	agesTable := table(func(name string, _ *madeThread) (string, string) { return ages[name][0], ages[name][1] })

	cases := []struct {
		name         string
		env, args    []string
		code         int
		stdout, errs string
	}{
		{"a table", nil, nil, exitOK, instants, ""},
		{"-o ids", nil, []string{"-o", "ids"}, exitOK, ids(order...), ""},
		{"-o json", nil, []string{"-o", "json"}, exitOK, jsonLines.String(), ""},
		{"--json", nil, []string{"--json"}, exitOK, jsonLines.String(), ""},
		{"--output table", nil, []string{"--output", "table"}, exitOK, instants, ""},
		{"--limit", nil, []string{"-o", "ids", "--limit", "2"}, exitOK, ids("e", "d"), ""},
		{"--after", nil, []string{"-o", "ids", "--after", made["d"].id, "--limit", "2"}, exitOK, ids("c", "b"), ""},
		{"--after a thread the filter leaves out", nil, []string{"-o", "ids", "--after", made["c"].id, "--provider", "acp"}, exitOK, ids("a"), ""},
		{"--after the oldest", nil, []string{"-o", "ids", "--after", made["a"].id}, exitOK, "", ""},
		{"--after no thread", nil, []string{"-o", "ids", "--after", "thr_nope"}, exitUsage, "",
			"baton: threads: --after thr_nope is not a thread; give an id that baton threads lists\n"},
		{"-o yaml", nil, []string{"-o", "yaml"}, exitUsage, "",
			"baton: threads: --output \"yaml\": want table, json or ids\n"},
		{"--json and -o ids", nil, []string{"--json", "-o", "ids"}, exitUsage, "",
			"baton: threads: --json is -o json, and -o says ids; give one of them\n"},
		{"BATON_OUTPUT", []string{"BATON_OUTPUT=ids"}, nil, exitOK, ids(order...), ""},
		{"-o over BATON_JSON", []string{"BATON_JSON=true"}, []string{"-o", "ids"}, exitOK, ids(order...), ""},
		{"--json over BATON_OUTPUT", []string{"BATON_OUTPUT=ids"}, []string{"--json"}, exitOK, jsonLines.String(), ""},
		{"BATON_OUTPUT=yaml", []string{"BATON_OUTPUT=yaml"}, nil, exitUsage, "", "baton: threads: BATON_OUTPUT=\"yaml\" (for --output): want table, json or ids\n"},
	}
	check := func(t *testing.T) {
		for _, c := range cases {
			out, errOut, code := batonEnv(t, append(c.env, "BATON_DATA="+data), "", append([]string{"threads"}, c.args...)...)
			if code != c.code || out != c.stdout || errOut != c.errs {
				t.Errorf("%s: exit %d (want %d)\nstdout (-want +got):\n%s\nstderr (-want +got):\n%s", c.name, code, c.code,
					cmp.Diff(c.stdout, out), cmp.Diff(c.errs, errOut))
			}
		}
		out, code := onTerminal(t, "threads", "--data", data)
		if diff := cmp.Diff(agesTable, out); code != exitOK || diff != "" {
			t.Errorf("threads on a terminal: exit %d (-want +got):\n%s", code, diff)
		}
	}
	t.Run("embedded", check)
	startService(t, data) // it holds the data dir: the verbs can only ask it
	t.Run("service", check)
}

// onTerminal runs baton with its stdout and stderr on a new
// pseudo-terminal and returns what it printed there (with the terminal's
// \r\n as \n) and its exit code.
func onTerminal(t *testing.T, args ...string) (string, int) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "baton"), args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child's copy is the only one: the master reads EIO once it is closed
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO when the terminal's last holder exits
		read <- b
	}()
	code := 0
	var ee *exec.ExitError
	if err := cmd.Wait(); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(<-read), "\r\n", "\n"), code
}
