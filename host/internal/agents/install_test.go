package agents

import (
	"github.com/baton-run/baton/host/internal/filelock"

	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func skipWithoutShell(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the test agents are shell scripts")
	}
}

// binaryAgent is a registry entry of an agent whose archive for this
// platform is at url.
func binaryAgent(id, version, url, cmd, sha string) Agent {
	return Agent{ID: id, Name: "Test " + id, Version: version, Distribution: Distribution{Binary: map[string]BinaryTarget{
		Platform(): {Archive: url, Cmd: cmd, Args: []string{"--acp"}, Env: map[string]string{"GREETING": "hello"}, SHA256: sha},
	}}}
}

// A binary agent is downloaded for this platform, its SHA-256 checked
// when the registry gives one and recorded always, extracted with its
// executable bits, and recorded in the lockfile; it runs.
func TestInstallBinary(t *testing.T) {
	skipWithoutShell(t)
	files := newFileServer(t)
	script := agentScript("1.0.0")
	for _, tc := range []struct {
		name, path, cmd string
		archive         []byte
		checked         bool // the registry gives the SHA-256
	}{
		{"tar.gz", "/dl/v1.0.0/agent-linux.tar.gz", "./bin/agent", tarGz(t,
			entry{name: "./", dir: true},
			entry{name: "bin/", dir: true},
			entry{name: "bin/agent", body: script, mode: 0o755},
			entry{name: "bin/agent-again", hard: "bin/agent"},
			entry{name: "bin/helper", body: script, mode: 0o750},
			entry{name: "lib/data.txt", body: "data", mode: 0o640},
			entry{name: "lib/agent", link: "../bin/agent"},
		), true},
		{"tgz without a SHA-256", "/dl/agent.tgz", "./agent", tarGz(t, entry{name: "agent", body: script, mode: 0o755}), false},
		{"tar", "/dl/agent.tar", "./agent", tarOf(t, entry{name: "agent", body: script, mode: 0o755}), true},
		{"zip", "/dl/agent.zip", "./bin/agent", zipOf(t,
			entry{name: "bin/", dir: true},
			entry{name: "bin/agent", body: script, mode: 0o755},
			entry{name: "agent-link", link: "bin/agent"},
		), true},
		{"zip without modes", "/dl/plain.ZIP", "./agent", zipOf(t, entry{name: "agent", body: script}), true},
		{"a bare executable", "/dl/agent-linux-x86_64", "./agent", []byte(script), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			url := files.put(tc.path, tc.archive)
			sum := sha256Hex(tc.archive)
			registered := ""
			if tc.checked {
				registered = strings.ToUpper(sum) // the registry's case is not ours
			}
			cat := catalogOf(t, data, newClock(t0), binaryAgent("test-agent", "1.0.0", url, tc.cmd, registered))
			in, err := Install(t.Context(), cat, "test-agent", "")
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(data, "agents", "test-agent", "1.0.0")
			if abs, err := filepath.Abs(dir); err != nil || abs != dir {
				t.Fatalf("the test's data dir is not absolute: %s", dir)
			}
			want := Installation{
				ID: "test-agent", Version: "1.0.0", Kind: KindBinary, Source: url, SHA256: sum, Dir: dir,
				Command:     []string{filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(tc.cmd, "./"))), "--acp"},
				Env:         map[string]string{"GREETING": "hello"},
				InstalledAt: t0,
			}
			if diff := cmp.Diff(want, in); diff != "" {
				t.Errorf("installed (-want +got):\n%s", diff)
			}
			if got := run(t, in); got != "agent 1.0.0 --acp GREETING=hello" {
				t.Errorf("the agent said %q", got)
			}
			locked, err := Installed(data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]Installation{"test-agent": want}, locked); diff != "" {
				t.Errorf("lockfile (-want +got):\n%s", diff)
			}
			if fi, err := os.Stat(filepath.Join(data, "agents", "agents.lock")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the lockfile is not private: %v", err)
			}
			if got, err := Lookup(data, "test-agent"); err != nil || !cmp.Equal(want, got) {
				t.Errorf("Lookup: %+v, %v", got, err)
			}
			agentsDirHolds(t, data, ".lock", "agents.lock", "registry.json", "registry.meta.json", "test-agent")
			if tc.name == "tar.gz" { // the other entries, as the archive made them
				for name, mode := range map[string]os.FileMode{"bin/helper": 0o750, "lib/data.txt": 0o640, "bin/agent-again": 0o755} {
					if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode() != mode {
						t.Errorf("%s: %v, want mode %v", name, err, mode)
					}
				}
				if target, err := os.Readlink(filepath.Join(dir, "lib/agent")); err != nil || target != "../bin/agent" {
					t.Errorf("the symlink lib/agent: %q %v", target, err)
				}
			}
		})
	}
}

// An archive whose SHA-256 is not the registry's is refused, naming
// both, and leaves nothing behind.
func TestInstallBinaryRefusesABadSHA256(t *testing.T) {
	files := newFileServer(t)
	archive := tarGz(t, entry{name: "agent", body: agentScript("1.0.0"), mode: 0o755})
	url := files.put("/agent.tar.gz", archive)
	data := t.TempDir()
	bad := strings.Repeat("0", 64)
	cat := catalogOf(t, data, newClock(t0), binaryAgent("test-agent", "1.0.0", url, "./agent", bad))
	_, err := Install(t.Context(), cat, "test-agent", "")
	want := "install agent test-agent: archive " + url + ": its SHA-256 is " + sha256Hex(archive) + ", but the registry says " + bad + ": refused"
	if err == nil || err.Error() != want {
		t.Fatalf("a bad SHA-256:\n%v\nwant\n%s", err, want)
	}
	if _, err := os.Lstat(filepath.Join(data, "agents", "test-agent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DATA/agents/test-agent is there after a refused install: %v", err)
	}
	agentsDirHolds(t, data, ".lock", "registry.json", "registry.meta.json")
	if _, err := Lookup(data, "test-agent"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Lookup after a refused install: %v", err)
	}
}

// An archive that would write outside its directory, or is not what the
// registry says, is refused and leaves nothing behind.
func TestInstallBinaryRefusesUnsafeArchives(t *testing.T) {
	skipWithoutShell(t)
	files := newFileServer(t)
	script := agentScript("1.0.0")
	ok := entry{name: "agent", body: script, mode: 0o755}
	for _, tc := range []struct {
		name    string
		path    string
		archive []byte
		cmd     string
		want    string
	}{
		{"a parent entry", "/a.tar.gz", tarGz(t, ok, entry{name: "../evil", body: "x", mode: 0o644}), "./agent",
			`extract: entry "../evil" has a '..' element`},
		{"a parent element", "/a.tar.gz", tarGz(t, ok, entry{name: "bin/../../evil", body: "x", mode: 0o644}), "./agent",
			`extract: entry "bin/../../evil" has a '..' element`},
		{"an absolute entry", "/a.tar.gz", tarGz(t, ok, entry{name: "/tmp/evil", body: "x", mode: 0o644}), "./agent",
			`extract: entry "/tmp/evil" is an absolute path`},
		{"a backslash", "/a.zip", zipOf(t, ok, entry{name: `..\evil`, body: "x"}), "./agent",
			`extract: entry "..\\evil" has a backslash`},
		{"a zip's parent entry", "/a.zip", zipOf(t, ok, entry{name: "../evil", body: "x"}), "./agent",
			`extract: entry "../evil" has a '..' element`},
		{"an absolute symlink", "/a.tar.gz", tarGz(t, ok, entry{name: "passwd", link: "/etc/passwd"}), "./agent",
			`extract: symlink passwd: target "/etc/passwd" is not a relative path`},
		{"a symlink out", "/a.tar.gz", tarGz(t, ok, entry{name: "bin/up", link: "../../x"}), "./agent",
			`extract: symlink bin/up: target "../../x" points outside the archive`},
		{"a symlink's late '..'", "/a.zip", zipOf(t, ok, entry{name: "s", link: "."}, entry{name: "l", link: "s/../x"}), "./agent",
			`extract: symlink l: target "s/../x" has a '..' after its start`},
		{"an entry under a symlink", "/a.tar.gz", tarGz(t, ok, entry{name: "s", link: "."}, entry{name: "s/evil", body: "x", mode: 0o644}), "./agent",
			`extract: entry "s/evil" lies under the symlink s`},
		{"a hard link out", "/a.tar.gz", tarGz(t, ok, entry{name: "h", hard: "/etc/passwd"}), "./agent",
			`extract: hard link h: target "/etc/passwd" is not a file of the archive`},
		{"a device", "/a.tar.gz", tarGz(t, ok, entry{name: "null", kind: tar.TypeChar}), "./agent",
			`extract: entry null: unsupported type '3'`},
		{"the same file twice", "/a.tar.gz", tarGz(t, ok, ok), "./agent",
			`extract: openat agent: file exists`},
		{"no command", "/a.tar.gz", tarGz(t, entry{name: "other", body: script, mode: 0o755}), "./agent",
			`the command agent is not in the archive: statat agent: no such file or directory`},
		{"a command that is a directory", "/a.tar.gz", tarGz(t, entry{name: "agent/", dir: true}), "./agent",
			`the command agent is not a file (d---------)`},
		{"a command through a symlink out", "/a.tar.gz", tarGz(t, entry{name: "agent", link: "../../../../bin/sh"}), "./agent",
			`extract: symlink agent: target "../../../../bin/sh" points outside the archive`},
		{"not a gzip", "/a.tar.gz", []byte("this is not a gzip stream at all"), "./agent",
			`extract: gzip: invalid header`},
		{"not a zip", "/a.zip", []byte("not zip"), "./agent",
			`extract: zip: not a valid zip file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			url := files.put(tc.path, tc.archive)
			cat := catalogOf(t, data, newClock(t0), binaryAgent("test-agent", "1.0.0", url, tc.cmd, ""))
			_, err := Install(t.Context(), cat, "test-agent", "")
			want := "install agent test-agent: archive " + url + ": " + tc.want
			if err == nil || err.Error() != want {
				t.Fatalf("refused with\n%v\nwant\n%s", err, want)
			}
			agentsDirHolds(t, data, ".lock", "registry.json", "registry.meta.json")
			if _, err := os.Lstat(filepath.Join(filepath.Dir(data), "evil")); err == nil {
				t.Error("an entry was written outside the data dir")
			}
		})
	}
}

// What Install refuses before it downloads anything, and what it
// cannot download.
func TestInstallRefuses(t *testing.T) {
	files := newFileServer(t)
	data := t.TempDir()
	other := "linux-x86_64"
	if Platform() == other {
		other = "darwin-aarch64"
	}
	gone := files.URL + "/gone.tar.gz"
	cat := catalogOf(t, data, newClock(t0),
		binaryAgent("bin-agent", "1.0.0", files.URL+"/a.tar.gz", "./agent", ""),
		binaryAgent("gone-agent", "1.0.0", gone, "./agent", ""),
		binaryAgent("up-agent", "1.0.0", files.URL+"/a.tar.gz", "../agent", ""),
		binaryAgent("ftp-agent", "1.0.0", "ftp://example.com/a.tar.gz", "./agent", ""),
		binaryAgent("xz-agent", "1.0.0", files.URL+"/a.tar.xz", "./agent", ""),
		Agent{ID: "uvx-agent", Version: "1.0.0", Distribution: Distribution{UVX: &Package{Package: "uvx-agent==1.0.0"}}},
		Agent{ID: "elsewhere", Version: "1.0.0", Distribution: Distribution{Binary: map[string]BinaryTarget{other: {Archive: "https://h/a", Cmd: "a"}}}},
		Agent{ID: "latest-agent", Version: "1.0.0", Distribution: Distribution{NPX: &Package{Package: "latest-agent@latest"}}},
		Agent{ID: "option-agent", Version: "1.0.0", Distribution: Distribution{NPX: &Package{Package: "--registry=http://evil/"}}},
	)
	for _, tc := range []struct {
		id, version, want string
		is                error
	}{
		{"nope", "", `install agent nope: the registry (` + cat.Source + `) has no agent "nope"`, nil},
		{"Bad/ID", "", `install agent Bad/ID: "Bad/ID" is not an agent id (lower-case letters, digits and '-', starting with a letter)`, nil},
		{"bin-agent", "1.0", `install agent bin-agent: "1.0" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`, nil},
		{"bin-agent", "2.0.0", "install agent bin-agent: version 2.0.0: the registry lists the archive of version 1.0.0 only", nil},
		{"gone-agent", "", "install agent gone-agent: download archive: GET " + gone + ": 404 Not Found", nil},
		{"up-agent", "", `install agent up-agent: the registry's command "../agent": "../agent" has a '..' element`, nil},
		{"ftp-agent", "", `install agent ftp-agent: archive "ftp://example.com/a.tar.gz" is not an http or https URL`, nil},
		{"xz-agent", "", "install agent xz-agent: archive " + files.URL + "/a.tar.xz: unsupported archive format (baton reads .tar.gz, .tgz, .tar, .zip or a bare executable)", nil},
		{"uvx-agent", "", "install agent uvx-agent: it is distributed for " + Platform() + " as a PyPI package (uvx) only, and baton does not install those yet: unsupported operation", errors.ErrUnsupported},
		{"elsewhere", "", "install agent elsewhere: the registry lists no distribution of it that baton knows (binary, npx or uvx)", nil},
		{"latest-agent", "", `install agent latest-agent: the registry's npm package "latest-agent@latest" is not pinned to an exact version: "latest" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`, nil},
		{"option-agent", "", `install agent option-agent: the registry's npm package "--registry=http://evil/" is not a package name`, nil},
	} {
		_, err := Install(t.Context(), cat, tc.id, tc.version)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Install(%s, %q):\n%v\nwant\n%s", tc.id, tc.version, err, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("Install(%s): %v is not %v", tc.id, err, tc.is)
		}
	}
	agentsDirHolds(t, data, ".lock", "registry.json", "registry.meta.json")
	if n := files.count(); n != 1 {
		t.Errorf("%d downloads, want the one of gone-agent", n)
	}
}

// Upgrade installs the registry's new version and removes the old one's
// files; at the registry's version it does nothing; Remove removes the
// agent's files and its entry, and Lookup then names the install.
func TestUpgradeAndRemove(t *testing.T) {
	skipWithoutShell(t)
	files := newFileServer(t)
	data, clk := t.TempDir(), newClock(t0)
	v1 := files.put("/v1/agent.tar.gz", tarGz(t, entry{name: "agent", body: agentScript("1.0.0"), mode: 0o755}))
	v2archive := tarGz(t, entry{name: "agent", body: agentScript("2.0.0"), mode: 0o755})
	v2 := files.put("/v2/agent.tar.gz", v2archive)

	cat1 := catalogOf(t, data, clk, binaryAgent("test-agent", "1.0.0", v1, "./agent", ""))
	if _, _, err := Upgrade(t.Context(), cat1, "test-agent"); !errors.Is(err, ErrNotInstalled) ||
		err.Error() != "upgrade agent test-agent: it is not installed: install it with 'baton agents install test-agent'" {
		t.Errorf("upgrade before an install: %v", err)
	}
	old, err := Install(t.Context(), cat1, "test-agent", "")
	if err != nil {
		t.Fatal(err)
	}
	// Installing the same version again replaces it.
	clk.add(1)
	again, err := Install(t.Context(), cat1, "test-agent", "")
	if err != nil || !again.InstalledAt.After(old.InstalledAt) || run(t, again) != "agent 1.0.0 --acp GREETING=hello" {
		t.Fatalf("install again: %+v %v", again, err)
	}

	clk.add(1)
	cat2 := catalogOf(t, data, clk, binaryAgent("test-agent", "2.0.0", v2, "./agent", sha256Hex(v2archive)))
	from, to, err := Upgrade(t.Context(), cat2, "test-agent")
	if err != nil {
		t.Fatal(err)
	}
	if from != "1.0.0" || to.Version != "2.0.0" || to.Source != v2 || !to.InstalledAt.Equal(clk.Now()) {
		t.Errorf("upgrade: from %s to %+v", from, to)
	}
	if got := run(t, to); got != "agent 2.0.0 --acp GREETING=hello" {
		t.Errorf("the upgraded agent said %q", got)
	}
	if _, err := os.Stat(old.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old version's files are still there: %v", err)
	}
	if got, err := Lookup(data, "test-agent"); err != nil || got.Version != "2.0.0" {
		t.Errorf("Lookup after the upgrade: %+v %v", got, err)
	}

	downloads := files.count()
	from, same, err := Upgrade(t.Context(), cat2, "test-agent")
	if err != nil || from != "2.0.0" || !cmp.Equal(to, same) || files.count() != downloads {
		t.Errorf("upgrade at the registry's version: from %s, %+v, %v, %d downloads", from, same, err, files.count()-downloads)
	}

	if err := Remove(data, "test-agent"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "agents", "test-agent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent's files are still there: %v", err)
	}
	if m, err := Installed(data); err != nil || len(m) != 0 {
		t.Errorf("installed after the removal: %v %v", m, err)
	}
	_, err = Lookup(data, "test-agent")
	if want := "agent test-agent is not installed: install it with 'baton agents install test-agent'"; !errors.Is(err, ErrNotInstalled) || err.Error() != want {
		t.Errorf("Lookup after the removal: %v, want %s", err, want)
	}
	if err := Remove(data, "test-agent"); !errors.Is(err, ErrNotInstalled) || err.Error() != "remove agent test-agent: not installed" {
		t.Errorf("remove again: %v", err)
	}
	if err := Remove(data, "../x"); err == nil || !strings.HasPrefix(err.Error(), `remove agent: "../x" is not an agent id`) {
		t.Errorf("remove a path: %v", err)
	}
}

// An agent whose files are gone is not installed, says Lookup, and
// Upgrade installs it again; a registry that drops an agent cannot
// upgrade it.
func TestLookupOfAnAgentWhoseFilesAreGone(t *testing.T) {
	skipWithoutShell(t)
	files := newFileServer(t)
	data := t.TempDir()
	url := files.put("/agent", []byte(agentScript("1.0.0")))
	cat := catalogOf(t, data, newClock(t0), binaryAgent("test-agent", "1.0.0", url, "agent", ""))
	in, err := Install(t.Context(), cat, "test-agent", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(in.Dir); err != nil {
		t.Fatal(err)
	}
	_, err = Lookup(data, "test-agent")
	if !errors.Is(err, ErrNotInstalled) || !strings.HasSuffix(err.Error(), ": reinstall it with 'baton agents install test-agent'") {
		t.Errorf("Lookup of an agent whose files are gone: %v", err)
	}
	if _, err := Lookup(data, "Test"); err == nil {
		t.Error("Lookup took a name that is not an id")
	}
	from, to, err := Upgrade(t.Context(), cat, "test-agent")
	if err != nil || from != "1.0.0" || to.Version != "1.0.0" {
		t.Fatalf("upgrade of an agent whose files are gone: from %s to %+v: %v", from, to, err)
	}
	if got, err := Lookup(data, "test-agent"); err != nil || run(t, got) != "agent 1.0.0 --acp GREETING=hello" {
		t.Errorf("Lookup after the upgrade put the files back: %+v %v", got, err)
	}
	empty := catalogOf(t, data, newClock(t0))
	if _, _, err := Upgrade(t.Context(), empty, "test-agent"); err == nil ||
		err.Error() != "upgrade agent test-agent: the registry ("+empty.Source+") no longer lists it" {
		t.Errorf("upgrade of an agent the registry dropped: %v", err)
	}
}

// A lockfile of a newer format, or not JSON, is refused rather than
// overwritten.
func TestLockfileRefused(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "agents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ content, want string }{
		{`{"version": 2, "agents": {}}`, "format 2 is newer than this baton's (1)"},
		{`{"version": 1, "agents": [`, "unexpected end of JSON input"},
	} {
		if err := os.WriteFile(filepath.Join(dir, LockfileName), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Installed(data); err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("Installed with %s: %v", tc.content, err)
		}
		if err := Remove(data, "a"); err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("Remove with %s: %v", tc.content, err)
		}
	}
}

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"./codex-acp", "codex-acp", ""},
		{"bin/agent", filepath.Join("bin", "agent"), ""},
		{"./", "", ""},
		{"", "", "empty path"},
		{"a/./b//c", filepath.Join("a", "b", "c"), ""},
		{"/abs", "", `"/abs" is an absolute path`},
		{"a/../b", "", `"a/../b" has a '..' element`},
		{`a\b`, "", `"a\\b" has a backslash`},
	} {
		got, err := localPath(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("localPath(%q) = %q, %v; want %q, %s", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// An install waits for another's lock, and gives up when its ctx ends;
// it removes what an install that never finished left behind.
func TestInstallWaitsForAnotherAndCleansUp(t *testing.T) {
	skipWithoutShell(t)
	if !filelock.Supported {
		t.Skip("no file lock on this platform")
	}
	files := newFileServer(t)
	data := t.TempDir()
	url := files.put("/agent", []byte(agentScript("1.0.0")))
	cat := catalogOf(t, data, newClock(t0), binaryAgent("test-agent", "1.0.0", url, "agent", ""))
	dir := filepath.Join(data, "agents")
	leftover := filepath.Join(dir, ".install-test-agent-123")
	if err := os.MkdirAll(filepath.Join(leftover, "node_modules"), 0o700); err != nil {
		t.Fatal(err)
	}

	unlock, err := lockAgents(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := Install(ctx, cat, "test-agent", ""); !errors.Is(err, context.DeadlineExceeded) ||
		!strings.HasPrefix(err.Error(), "install agent test-agent: wait for another install to finish") {
		t.Fatalf("an install while another holds the lock: %v", err)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("the leftover went while another install held the lock: %v", err)
	}

	// It waits (the deadline above ended a wait that nothing else could
	// end) until the lock is let go: an install started under the lock
	// goes on once it is released.
	done := make(chan error, 1)
	go func() {
		_, err := Install(t.Context(), cat, "test-agent", "")
		done <- err
	}()
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unfinished install's leftover is still there: %v", err)
	}
	agentsDirHolds(t, data, ".lock", "agents.lock", "registry.json", "registry.meta.json", "test-agent")
}
