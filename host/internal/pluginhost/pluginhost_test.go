package pluginhost_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk/plugintest"
)

// acpBin is the real acp plugin binary.
var acpBin string

// TestMain uses the acp plugin `make build` made (named by $BATON_BIN), or
// builds it.
func TestMain(m *testing.M) {
	plugintest.CoverChildren()
	if bin := os.Getenv("BATON_BIN"); bin != "" {
		acpBin = filepath.Join(bin, pluginhost.BinaryPrefix+"acp")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "baton-pluginhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	acpBin = filepath.Join(dir, pluginhost.BinaryPrefix+"acp")
	cmd := exec.Command("go", "build", "-o", acpBin, ".")
	cmd.Dir = "../../../plugins/acp"
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the acp plugin: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// write writes a file (a stand-in plugin binary that is never run, or a
// lockfile).
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// lockfile writes dir's plugins.lock by hand.
func lockfile(t *testing.T, dir string, entries map[string]pluginhost.LockEntry) {
	t.Helper()
	lf := `{"version":1,"plugins":{`
	first := true
	for name, e := range entries {
		if !first {
			lf += ","
		}
		first = false
		lf += fmt.Sprintf(`%q:{"file":%q,"sha256":%q}`, name, e.File, e.SHA256)
	}
	write(t, filepath.Join(dir, pluginhost.LockfileName), lf+"}}")
}

// Find takes a plugin from the first directory that holds it, with the
// checksum that directory's lockfile records, and refuses one whose
// checksum is missing or unreadable, naming the plugin.
func TestFind(t *testing.T) {
	const sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	const sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	first, second, empty := t.TempDir(), t.TempDir(), t.TempDir()
	for _, f := range []string{"both", "unlocked", "misfiled", "badsum", "shortsum"} {
		write(t, filepath.Join(first, pluginhost.BinaryPrefix+f), "#!/bin/sh\n")
	}
	lockfile(t, first, map[string]pluginhost.LockEntry{
		"both":     {File: pluginhost.BinaryPrefix + "both", SHA256: sumA},
		"misfiled": {File: pluginhost.BinaryPrefix + "other", SHA256: sumA},
		"badsum":   {File: pluginhost.BinaryPrefix + "badsum", SHA256: "not hex"},
		"shortsum": {File: pluginhost.BinaryPrefix + "shortsum", SHA256: "abcd"},
		"absent":   {File: pluginhost.BinaryPrefix + "absent", SHA256: sumA},
	})
	for _, f := range []string{"both", "second"} {
		write(t, filepath.Join(second, pluginhost.BinaryPrefix+f), "#!/bin/sh\n")
	}
	lockfile(t, second, map[string]pluginhost.LockEntry{
		"both":   {File: pluginhost.BinaryPrefix + "both", SHA256: sumB},
		"second": {File: pluginhost.BinaryPrefix + "second", SHA256: sumB},
	})
	broken := t.TempDir()
	write(t, filepath.Join(broken, pluginhost.BinaryPrefix+"acp"), "#!/bin/sh\n")
	write(t, filepath.Join(broken, pluginhost.LockfileName), "{not json")

	type found struct{ Path, Sum, Err string }
	m := pluginhost.New(pluginhost.Config{Dirs: []string{empty, filepath.Join(empty, "missing"), first, second}})
	find := func(m *pluginhost.Manager, name string) found {
		p, sum, err := m.Find(name)
		if err != nil {
			return found{Err: err.Error()}
		}
		return found{Path: p, Sum: fmt.Sprintf("%x", sum)}
	}
	lock1 := filepath.Join(first, pluginhost.LockfileName)
	got := map[string]found{}
	for _, name := range []string{"both", "second", "unlocked", "misfiled", "badsum", "shortsum", "absent", "none"} {
		got[name] = find(m, name)
	}
	got["broken lockfile"] = find(pluginhost.New(pluginhost.Config{Dirs: []string{broken}}), "acp")
	dirs := fmt.Sprint([]string{empty, filepath.Join(empty, "missing"), first, second})
	noSum := func(name string) string {
		return fmt.Sprintf("plugin %s at %s has no checksum in %s; record it with 'baton plugin lock %s' or install it with 'baton plugin install'",
			name, filepath.Join(first, pluginhost.BinaryPrefix+name), lock1, first)
	}
	want := map[string]found{
		"both":            {Path: filepath.Join(first, pluginhost.BinaryPrefix+"both"), Sum: sumA},
		"second":          {Path: filepath.Join(second, pluginhost.BinaryPrefix+"second"), Sum: sumB},
		"unlocked":        {Err: noSum("unlocked")},
		"misfiled":        {Err: noSum("misfiled")},
		"badsum":          {Err: fmt.Sprintf(`plugin badsum: bad sha256 "not hex" in %s`, lock1)},
		"shortsum":        {Err: fmt.Sprintf(`plugin shortsum: bad sha256 "abcd" in %s`, lock1)},
		"absent":          {Err: "plugin not installed: no baton-plugin-absent in " + dirs},
		"none":            {Err: "plugin not installed: no baton-plugin-none in " + dirs},
		"broken lockfile": {Err: fmt.Sprintf("read plugin lockfile %s: invalid character 'n' looking for beginning of object key string", filepath.Join(broken, pluginhost.LockfileName))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
	if _, _, err := m.Find("none"); !errors.Is(err, pluginhost.ErrNotInstalled) {
		t.Errorf("Find of a plugin in no directory: %v, want ErrNotInstalled", err)
	}
}

// Installed lists every plugin binary of every directory once, sorted;
// files that are not plugins, directories and missing directories add
// nothing.
func TestInstalled(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, f := range []string{"zed", "acp", ""} {
		write(t, filepath.Join(first, pluginhost.BinaryPrefix+f), "#!/bin/sh\n")
	}
	write(t, filepath.Join(first, "README"), "not a plugin")
	write(t, filepath.Join(first, pluginhost.LockfileName), "{}")
	if err := os.Mkdir(filepath.Join(first, pluginhost.BinaryPrefix+"dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"acp", "beta"} {
		write(t, filepath.Join(second, pluginhost.BinaryPrefix+f), "#!/bin/sh\n")
	}
	m := pluginhost.New(pluginhost.Config{Dirs: []string{filepath.Join(first, "missing"), first, second}})
	if diff := cmp.Diff([]string{"acp", "beta", "zed"}, m.Installed()); diff != "" {
		t.Errorf("Installed (-want +got):\n%s", diff)
	}
	if got := pluginhost.New(pluginhost.Config{}).Installed(); got != nil {
		t.Errorf("Installed with no directories = %v", got)
	}
}

// install installs the real acp plugin in a new directory under names.
func install(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := pluginhost.Install(acpBin, dir, n); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A plugin binary that differs from the checksum recorded for it is not
// run: Get says so.
func TestGetRefusesAChangedBinary(t *testing.T) {
	dir := install(t, "acp")
	f, err := os.OpenFile(filepath.Join(dir, pluginhost.BinaryPrefix+"acp"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("tampered")
	f.Close()
	m := pluginhost.New(pluginhost.Config{Dirs: []string{dir}})
	defer m.Close()
	_, err = m.Get(t.Context(), "acp")
	if err == nil || !strings.Contains(err.Error(), "its SHA-256 does not match the one recorded for it") {
		t.Fatalf("Get of a changed binary: %v, want a checksum refusal", err)
	}
}

// Lock records the SHA-256 of every plugin binary of a directory (and
// nothing else there); Install copies a binary in and records it, under a
// plain name only. What they record is what Find returns.
func TestLockAndInstall(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, pluginhost.BinaryPrefix+"a"), "a")
	write(t, filepath.Join(dir, pluginhost.BinaryPrefix+"b"), "b")
	write(t, filepath.Join(dir, "README"), "not a plugin")
	if err := os.Mkdir(filepath.Join(dir, pluginhost.BinaryPrefix+"dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := pluginhost.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("Lock's names (-want +got):\n%s", diff)
	}
	src := filepath.Join(t.TempDir(), "built")
	write(t, src, "c")
	if err := pluginhost.Install(src, dir, "c"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "x/y", "x y", ".", "..", "-x", "X", "a_b", "a.b"} {
		want := fmt.Sprintf("install plugin: plugin name %q is not allowed: use lower-case letters, digits and '-', starting with a letter or digit (for example --name myagent)", bad)
		if err := pluginhost.Install(src, dir, bad); err == nil || err.Error() != want {
			t.Errorf("Install as %q: %v, want %s", bad, err, want)
		}
	}
	if err := pluginhost.Install(filepath.Join(dir, "missing"), dir, "d"); err == nil {
		t.Error("Install of a missing file succeeded")
	}
	lf, err := pluginhost.ReadLockfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of "a", "b" and "c", each from where it was found.
	want := pluginhost.Lockfile{Version: 1, Plugins: map[string]pluginhost.LockEntry{
		"a": {File: pluginhost.BinaryPrefix + "a", SHA256: "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
			Source: "file:" + filepath.Join(dir, pluginhost.BinaryPrefix+"a")},
		"b": {File: pluginhost.BinaryPrefix + "b", SHA256: "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d",
			Source: "file:" + filepath.Join(dir, pluginhost.BinaryPrefix+"b")},
		"c": {File: pluginhost.BinaryPrefix + "c", SHA256: "2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6",
			Source: "file:" + src},
	}}
	if diff := cmp.Diff(want, lf); diff != "" {
		t.Errorf("lockfile (-want +got):\n%s", diff)
	}
	m := pluginhost.New(pluginhost.Config{Dirs: []string{dir}})
	got := map[string]string{}
	for _, n := range m.Installed() {
		_, sum, err := m.Find(n)
		if err != nil {
			t.Fatal(err)
		}
		got[n] = fmt.Sprintf("%x", sum)
	}
	if diff := cmp.Diff(map[string]string{"a": want.Plugins["a"].SHA256, "b": want.Plugins["b"].SHA256, "c": want.Plugins["c"].SHA256}, got); diff != "" {
		t.Errorf("Find after Lock and Install (-want +got):\n%s", diff)
	}
}

// Lock keeps what an install recorded of a binary that has not changed
// (its source and self-description), and records a changed one afresh,
// from where it is.
func TestLockKeepsRecords(t *testing.T) {
	dir := t.TempDir()
	entry, err := pluginhost.InstallFile(t.Context(), acpBin, dir, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pluginhost.InstallFile(t.Context(), acpBin, dir, "changed"); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, pluginhost.BinaryPrefix+"changed")
	write(t, changed, "changed")
	if _, err := pluginhost.Lock(dir); err != nil {
		t.Fatal(err)
	}
	lf, err := pluginhost.ReadLockfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]pluginhost.LockEntry{
		"kept": entry,
		"changed": {File: pluginhost.BinaryPrefix + "changed", SHA256: sum(t, changed),
			Source: "file:" + changed},
	}
	if diff := cmp.Diff(want, lf.Plugins); diff != "" {
		t.Errorf("lockfile after Lock (-want +got):\n%s", diff)
	}
	if entry.Version == "" || entry.SDKVersion == "" || entry.Protocol != 1 || entry.Source != "file:"+acpBin {
		t.Errorf("InstallFile recorded %+v", entry)
	}

	// A record written before sources were kept gets its file's source.
	kept := filepath.Join(dir, pluginhost.BinaryPrefix+"kept")
	old := fmt.Sprintf(`{"version":1,"plugins":{"kept":{"file":%q,"sha256":%q}}}`, pluginhost.BinaryPrefix+"kept", entry.SHA256)
	if err := os.WriteFile(filepath.Join(dir, pluginhost.LockfileName), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pluginhost.Lock(dir); err != nil {
		t.Fatal(err)
	}
	if lf, err = pluginhost.ReadLockfile(dir); err != nil {
		t.Fatal(err)
	}
	want = map[string]pluginhost.LockEntry{
		"kept":    {File: pluginhost.BinaryPrefix + "kept", SHA256: entry.SHA256, Source: "file:" + kept},
		"changed": want["changed"],
	}
	if diff := cmp.Diff(want, lf.Plugins); diff != "" {
		t.Errorf("an old lockfile after Lock (-want +got):\n%s", diff)
	}
}

func sum(t *testing.T, p string) string {
	t.Helper()
	s, err := pluginhost.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The lockfile is as readable as its directory: private in the data dir's
// plugins directory, readable by all beside a baton installed for all
// (even where a stale temporary file of another mode was left).
func TestLockfileMode(t *testing.T) {
	got := map[os.FileMode]os.FileMode{}
	for _, mode := range []os.FileMode{0o700, 0o755} {
		dir := filepath.Join(t.TempDir(), "plugins")
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, pluginhost.BinaryPrefix+"a"), "a")
		if err := os.WriteFile(filepath.Join(dir, "."+pluginhost.LockfileName+".tmp"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := pluginhost.Lock(dir); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, pluginhost.LockfileName))
		if err != nil {
			t.Fatal(err)
		}
		got[mode] = fi.Mode().Perm()
	}
	if diff := cmp.Diff(map[os.FileMode]os.FileMode{0o700: 0o600, 0o755: 0o644}, got); diff != "" {
		t.Errorf("lockfile mode by its directory's (-want +got):\n%s", diff)
	}
}
