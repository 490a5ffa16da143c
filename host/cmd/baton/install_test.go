package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

// sdkModule is the sdk's published module path.
const sdkModule = "github.com/baton-run/baton/sdk"

// proxyModule writes one version of a module into a module proxy
// directory (the layout GOPROXY=file://DIR reads): @v/list, .info, .mod
// and a .zip of files (paths relative to the module root).
func proxyModule(t *testing.T, proxy, mod, version string, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadFile(filepath.Join(dir, "list"))
	list = append(list, version+"\n"...)
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		w, err := zw.Create(mod + "@" + version + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string][]byte{
		"list":            list,
		version + ".info": fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-02T03:04:05Z"}`, version),
		version + ".mod":  files["go.mod"],
		version + ".zip":  zb.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// moduleFiles reads a module's directory as a module zip holds it: every
// regular file, with none of a nested module's or of .git, and the
// changes given (a nil change drops the file).
func moduleFiles(t *testing.T, dir string, change map[string][]byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == ".git" || d.Name() == "vendor" || fileExists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || d.Name() == "go.work" || d.Name() == "go.work.sum" {
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, b := range change {
		if b == nil {
			delete(files, n)
		} else {
			files[n] = b
		}
	}
	return files
}

// tinyPlugin is a plugin module's files: a main serving the smallest
// adapter, of version version, built against sdk at sdkVersion. Its go.mod
// requires what the sdk's does, as a tidy one would.
func tinyPlugin(t *testing.T, mod, version, sdkVersion string) map[string][]byte {
	t.Helper()
	sdkMod, err := os.ReadFile(filepath.Join(root, "sdk", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(sdkMod, []byte("\nrequire"))
	if i < 0 {
		t.Fatal("sdk/go.mod requires nothing")
	}
	return map[string][]byte{
		"go.mod": fmt.Appendf(nil, "module %s\n\ngo 1.26.8\n\nrequire %s %s\n%s", mod, sdkModule, sdkVersion, sdkMod[i:]),
		"main.go": fmt.Appendf(nil, `package main

import (
	"context"
	"errors"
	"os"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/server"
)

type adapter struct{}

func (adapter) Describe() sdk.Description {
	return sdk.Description{Name: "tiny", Version: %q, WireProtocol: "none"}
}

func (adapter) OpenSession(context.Context, sdk.OpenSessionRequest, sdk.Emitter) (sdk.OpenSessionResponse, error) {
	return sdk.OpenSessionResponse{}, errors.New("tiny runs nothing")
}

func (adapter) StartTurn(context.Context, sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	return sdk.StartTurnResponse{}, errors.New("tiny runs nothing")
}

func (adapter) CloseSession(context.Context, string) error { return nil }

func main() {
	if err := server.Serve(adapter{}); err != nil {
		os.Exit(1)
	}
}
`, strings.TrimPrefix(version, "v")),
	}
}

// goEnv is an environment in which go install reaches only the module
// proxy directory proxy and the modules this machine has downloaded (no
// network), with a module cache of its own.
func goEnv(t *testing.T, proxy string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	downloaded := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOFLAGS", "GOMODCACHE", "GOWORK", "GOTOOLCHAIN", "GOBIN", "BATON_DATA":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOPROXY=file://"+proxy+",file://"+downloaded, "GOSUMDB=off", "GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOMODCACHE="+t.TempDir(), "GOWORK=off", "GOTOOLCHAIN=local")
}

// A plugin installed from a module through a module proxy directory (the
// sdk and baton-plugin-exec published there, no network): go install
// builds it, it is locked with where it came from and what it says of
// itself, listed, verified (a changed byte named, and refused at start),
// upgraded to the proxy's latest version (a failed upgrade keeps it),
// and removed; a module that speaks another plugin protocol version is
// refused, at install and at start, naming both versions.
func TestPluginInstallFromModule(t *testing.T) {
	const plugin = "github.com/baton-run/baton-plugin-exec"
	proxy := t.TempDir()
	sdkFiles := moduleFiles(t, filepath.Join(root, "sdk"), nil)
	proxyModule(t, proxy, sdkModule, "v1.0.0", sdkFiles)
	version := sdkFiles["version.go"]
	if !bytes.Contains(version, []byte("const ProtocolVersion = 1\n")) {
		t.Fatal("sdk/version.go has no `const ProtocolVersion = 1`")
	}
	proto2 := withFile(sdkFiles, "version.go", bytes.Replace(version, []byte("const ProtocolVersion = 1\n"), []byte("const ProtocolVersion = 2\n"), 1))
	proxyModule(t, proxy, sdkModule, "v1.0.1-proto2", proto2)
	execDir := filepath.Join(root, "testdata", "plugins", "exec")
	proxyModule(t, proxy, plugin, "v1.0.0", moduleFiles(t, execDir, nil))
	adapter, err := os.ReadFile(filepath.Join(execDir, "adapter.go"))
	if err != nil || !bytes.Contains(adapter, []byte(`= "1.0.0"`)) {
		t.Fatalf("testdata/plugins/exec/adapter.go has no version 1.0.0 (%v)", err)
	}
	proxyModule(t, proxy, plugin, "v1.1.0", moduleFiles(t, execDir,
		map[string][]byte{"adapter.go": bytes.Replace(adapter, []byte(`= "1.0.0"`), []byte(`= "1.1.0"`), 1)}))
	const future = "github.com/baton-run/baton-plugin-future"
	proxyModule(t, proxy, future, "v1.0.0", tinyPlugin(t, future, "v1.0.0", "v1.0.1-proto2"))

	data := t.TempDir()
	goenv := goEnv(t, proxy)
	env := append(slices.Clip(goenv), "BATON_DATA="+data)
	dir := filepath.Join(data, "plugins")
	bin := filepath.Join(dir, "baton-plugin-exec")
	exe := lonelyBaton(t)
	type result struct {
		Stdout, Stderr string
		Code           int
	}
	expect := func(what string, want result, args ...string) {
		t.Helper()
		out, errOut, code := execAt(t, exe, env, args...)
		got := result{out, errOut, code}
		if want.Stderr == "<any>" {
			got.Stderr = "<any>"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s (-want +got):\n%s\nstderr:\n%s", what, diff, errOut)
		}
	}

	expect("install", result{"installed plugin exec 1.0.0 (" + plugin + "@v1.0.0) in " + dir + "\n", "<any>", 0},
		"plugin", "install", plugin+"@v1.0.0")
	sum := sha(t, bin)
	lock := func(sum, version string) map[string]any {
		return map[string]any{"version": 1.0, "plugins": map[string]any{"exec": map[string]any{
			"file": "baton-plugin-exec", "sha256": sum, "source": plugin + "@v" + version, "protocol": 1.0,
			"version": version, "sdkVersion": sdk.Version, "capabilities": []any{"interrupt", "resume"}}}}
	}
	if diff := cmp.Diff(lock(sum, "1.0.0"), readLock(t, dir)); diff != "" {
		t.Errorf("lockfile after install (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]os.FileMode{dir: 0o700, bin: 0o700}, modes(t, dir, bin)); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}

	out, errOut, code := execAt(t, exe, env, "plugin", "list", "--json")
	var rows []pluginRow
	for l := range strings.Lines(out) {
		var r pluginRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("plugin list --json: %v\n%s", err, out)
		}
		rows = append(rows, r)
	}
	want := []pluginRow{{Name: "exec", Version: "1.0.0", SDKVersion: sdk.Version, Protocol: 1, WireProtocol: "exec/1",
		Source: plugin + "@v1.0.0", Capabilities: []string{"interrupt", "resume"}, Path: bin}}
	if diff := cmp.Diff(want, rows); code != 0 || diff != "" {
		t.Errorf("plugin list --json: exit %d (-want +got):\n%s\n%s", code, diff, errOut)
	}
	expect("list", result{"NAME  VERSION  PROTOCOL  SOURCE                                         CAPABILITIES\n" +
		"exec  1.0.0    1         github.com/baton-run/baton-plugin-exec@v1.0.0  interrupt,resume\n", "", 0},
		"plugin", "list")
	expect("verify", result{"exec: ok: " + bin + "\n", "", 0}, "plugin", "verify")

	// A changed byte: verify names it, and the host refuses to start it.
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(bin, b, 0o700); err != nil {
		t.Fatal(err)
	}
	expect("verify a changed binary", result{"exec: tampered: " + bin + " has SHA-256 " + sha(t, bin) + ", the lock records " + sum +
		"; reinstall it (baton plugin install or upgrade) or remove it\n", "baton: plugin verify: 1 failed: exec (tampered)\n", 1},
		"plugin", "verify")
	expect("list a changed binary", result{"NAME  VERSION  PROTOCOL  SOURCE  CAPABILITIES\n",
		"baton: plugin exec: start plugin " + bin + ": its SHA-256 does not match the one recorded for it; reinstall it or record the new checksum: checksums did not match\n", 1},
		"plugin", "list")
	b[len(b)/2] ^= 1
	if err := os.WriteFile(bin, b, 0o700); err != nil {
		t.Fatal(err)
	}

	// Upgrade: to the proxy's latest; to a version that is not there, which
	// keeps what is installed.
	expect("upgrade", result{"upgraded plugin exec: " + plugin + "@v1.0.0 -> " + plugin + "@v1.1.0\n", "<any>", 0},
		"plugin", "upgrade", "exec")
	upgraded := sha(t, bin)
	if diff := cmp.Diff(lock(upgraded, "1.1.0"), readLock(t, dir)); upgraded == sum || diff != "" {
		t.Errorf("lockfile after upgrade (the binary's sha256 was %s, is %s) (-want +got):\n%s", sum, upgraded, diff)
	}
	_, errOut, code = execAt(t, exe, env, "plugin", "upgrade", "exec", "v9.9.9")
	if last := "baton: upgrade plugin exec (kept " + plugin + "@v1.1.0): install plugin " + plugin + "@v9.9.9: go install failed (exit status 1); " +
		"check the module path and version, and that the go command can reach your module proxy (GOPROXY)\n"; code != 1 || !strings.HasSuffix(errOut, "\n"+last) {
		t.Errorf("upgrade to a missing version: exit %d, stderr:\n%s\nwant it to end %q", code, errOut, last)
	}
	if diff := cmp.Diff(lock(upgraded, "1.1.0"), readLock(t, dir)); sha(t, bin) != upgraded || diff != "" {
		t.Errorf("after a failed upgrade the binary's sha256 is %s (want %s), lockfile (-want +got):\n%s", sha(t, bin), upgraded, diff)
	}
	expect("verify after upgrade", result{"exec: ok: " + bin + "\n", "", 0}, "plugin", "verify")

	// A plugin of another protocol version: refused at install (nothing
	// left behind) and, copied in and locked by hand, at start.
	installFuture := []string{"plugin", "install", future + "@v1.0.0"}
	out, errOut, code = execAt(t, exe, env, installFuture...)
	refusal := "the plugin speaks plugin protocol version 2, this host speaks version 1: upgrade baton to a release that speaks protocol 2, or install a release of the plugin built for protocol 1\n"
	if code != 1 || out != "" || !strings.HasSuffix(errOut, "\nbaton: install plugin future: "+future+"@v1.0.0: "+refusal) {
		t.Errorf("install a protocol 2 plugin: exit %d\n%s\n%s", code, out, errOut)
	}
	if diff := cmp.Diff([]string{"baton-plugin-exec", "plugins.lock"}, ls(t, dir)); diff != "" {
		t.Errorf("plugin dir after a refused install (-want +got):\n%s", diff)
	}
	other := t.TempDir()
	gocmd := exec.Command("go", "install", future+"@v1.0.0")
	gocmd.Env = append(slices.Clip(goenv), "GOBIN="+other)
	if out, err := gocmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", future, err, out)
	}
	expect("lock", result{"recorded 1 plugins in " + filepath.Join(other, "plugins.lock") + ": [future]\n", "", 0}, "plugin", "lock", other)
	expect("list a protocol 2 plugin", result{"NAME  VERSION  PROTOCOL  SOURCE                                         CAPABILITIES\n" +
		"exec  1.1.0    1         github.com/baton-run/baton-plugin-exec@v1.1.0  interrupt,resume\n",
		"baton: plugin future: " + refusal, 1},
		"plugin", "list", "--plugin-dir", other)

	// Remove: the binary and its record go; a second remove says there is
	// nothing to remove.
	expect("remove", result{"removed plugin exec from " + dir + "\n", "", 0}, "plugin", "remove", "exec")
	if diff := cmp.Diff(map[string]any{"version": 1.0, "plugins": map[string]any{}}, readLock(t, dir)); diff != "" {
		t.Errorf("lockfile after remove (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"plugins.lock"}, ls(t, dir)); diff != "" {
		t.Errorf("plugin dir after remove (-want +got):\n%s", diff)
	}
	expect("remove again", result{"", "baton: remove plugin exec: it is not installed in " + dir + " (see 'baton plugin list')\n", 1},
		"plugin", "remove", "exec")
	expect("verify after remove", result{"", "", 0}, "plugin", "verify")
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// withFile is a copy of m with k set to v.
func withFile(m map[string][]byte, k string, v []byte) map[string][]byte {
	c := map[string][]byte{}
	for n, b := range m {
		c[n] = b
	}
	c[k] = v
	return c
}

func sha(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sha256sum", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))[0]
}

func readLock(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "plugins.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func modes(t *testing.T, paths ...string) map[string]os.FileMode {
	t.Helper()
	m := map[string]os.FileMode{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		m[p] = fi.Mode().Perm()
	}
	return m
}

// lonelyBaton is a copy of baton in a directory of its own: no plugins
// beside it, so that its plugins are the data directory's only.
func lonelyBaton(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "baton"))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "baton")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// execAt runs the baton executable exe with exactly this environment.
func execAt(t *testing.T, exe string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// Each refusal says what to do: a name that is not [a-z0-9][a-z0-9-]*, a
// plugin directory or binary others may write, and a binary that is not a
// Baton plugin, at install (nothing is left behind) and when the host
// starts the plugin; verify names an unlocked, a missing and an unsafe
// plugin.
func TestPluginRefusals(t *testing.T) {
	acp := filepath.Join(binDir, "baton-plugin-acp")
	exe := lonelyBaton(t)
	// A go command that is asked anything fails at once, offline.
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GOPROXY=off", "GOFLAGS=-mod=mod"}
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		base = append(base, "GOCOVERDIR="+d)
	}
	fresh := func() (env []string, dir string) {
		data := t.TempDir()
		return append(slices.Clip(base), "BATON_DATA="+data), filepath.Join(data, "plugins")
	}
	type result struct {
		Stdout, Stderr string
		Code           int
	}
	run := func(env []string, args ...string) result {
		t.Helper()
		out, errOut, code := execAt(t, exe, env, args...)
		return result{out, errOut, code}
	}
	check := func(what string, want, got result) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	const header = "NAME  VERSION  PROTOCOL  SOURCE  CAPABILITIES\n"
	badName := func(name string) string {
		return fmt.Sprintf("plugin name %q is not allowed: use lower-case letters, digits and '-', starting with a letter or digit (for example --name myagent)", name)
	}

	// Names, at install (from a file and from a module), remove and start.
	env, dir := fresh()
	for _, name := range []string{"Bad", "a_b", ".", "..", "-x", "a/b", "a.b", ""} {
		check("install as "+name, result{"", "baton: install plugin: " + badName(name) + "\n", 1}, run(env, "plugin", "install", "--", name, acp))
		check("remove "+name, result{"", "baton: remove plugin: " + badName(name) + "\n", 1}, run(env, "plugin", "remove", "--", name))
		if name != "" { // --name "" is no --name
			check("install a module as "+name, result{"", "baton: install plugin: " + badName(name) + "\n", 1},
				run(env, "plugin", "install", "--name", name, "example.com/agent@v1.0.0"))
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused installs made %s: %v", dir, err)
	}
	named := t.TempDir()
	copyFile(t, acp, filepath.Join(named, "baton-plugin-Bad"), 0o755)
	run(env, "plugin", "lock", named)
	check("start a plugin named Bad", result{header, "baton: plugin Bad at " + filepath.Join(named, "baton-plugin-Bad") + ": " + badName("Bad") +
		"; rename the file baton-plugin-NAME\n", 1}, run(env, "plugin", "list", "--plugin-dir", named))

	// A directory others may write, at install.
	env, dir = fresh()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o777)
	writable := func(what, p string, mode os.FileMode) string {
		return fmt.Sprintf("%s %s is writable by group or others (mode %04o), so anyone who can write it could run code as baton: make it private with 'chmod go-w %s'",
			what, p, mode, p)
	}
	check("install into a writable dir", result{"", "baton: install plugin acp: " + writable("plugin directory", dir, 0o777) + "\n", 1},
		run(env, "plugin", "install", "acp", acp))
	if diff := cmp.Diff([]string(nil), ls(t, dir)); diff != "" {
		t.Errorf("a refused install left (-want +got):\n%s", diff)
	}
	// ... and at start, and the binary too; verify names each.
	chmod(t, dir, 0o700)
	check("install", result{"installed plugin acp 0.1.0 (file:" + acp + ") in " + dir + "\n", "", 0}, run(env, "plugin", "install", "acp", acp))
	bin := filepath.Join(dir, "baton-plugin-acp")
	check("upgrade a plugin from a file", result{"", "baton: upgrade plugin acp: it was installed from a file (file:" + acp +
		"), not a module; install the new binary with 'baton plugin install acp FILE'\n", 1}, run(env, "plugin", "upgrade", "acp"))
	chmod(t, dir, 0o770)
	check("start from a writable dir", result{header, "baton: plugin acp: " + writable("plugin directory", dir, 0o770) + "\n", 1},
		run(env, "plugin", "list"))
	check("verify a writable dir", result{dir + ": permission: " + writable("plugin directory", dir, 0o770) + "\nacp: ok: " + bin + "\n",
		"baton: plugin verify: 1 failed: " + dir + " (permission)\n", 1}, run(env, "plugin", "verify"))
	chmod(t, dir, 0o700)
	chmod(t, bin, 0o722)
	check("start a writable binary", result{header, "baton: plugin acp: " + writable("plugin", bin, 0o722) + "\n", 1},
		run(env, "plugin", "list"))
	// An unlocked binary and a locked one that is gone, beside it.
	copyFile(t, acp, filepath.Join(dir, "baton-plugin-extra"), 0o700)
	check("install gone", result{"installed plugin gone 0.1.0 (file:" + acp + ") in " + dir + "\n", "", 0}, run(env, "plugin", "install", "gone", acp))
	if err := os.Remove(filepath.Join(dir, "baton-plugin-gone")); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(dir, "plugins.lock")
	check("verify", result{"acp: permission: " + writable("plugin", bin, 0o722) + "\n" +
		"extra: not locked: " + filepath.Join(dir, "baton-plugin-extra") + " has no checksum in " + lockPath + "; if you trust it, record it with 'baton plugin lock " + dir + "', else remove it\n" +
		"gone: missing: " + filepath.Join(dir, "baton-plugin-gone") + " is locked but not there; reinstall it, or 'baton plugin remove gone' to forget it\n",
		"baton: plugin verify: 3 failed: acp (permission), extra (not locked), gone (missing)\n", 1}, run(env, "plugin", "verify"))

	// A binary that is not a Baton plugin, at install and at start.
	env, dir = fresh()
	script := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const fix = "); install a binary whose main calls server.Serve from github.com/baton-run/baton/sdk/server\n"
	got := run(env, "plugin", "install", "agent", script)
	if prefix := "baton: install plugin agent: " + script + " is not a Baton plugin (the plugin handshake failed: Unrecognized remote plugin message: hello\n"; got.Code != 1 || got.Stdout != "" ||
		!strings.HasPrefix(got.Stderr, prefix) || !strings.HasSuffix(got.Stderr, fix) {
		t.Errorf("install a script: %+v\nwant stderr %q...%q", got, prefix, fix)
	}
	if diff := cmp.Diff([]string{}, append([]string{}, ls(t, dir)...)); diff != "" {
		t.Errorf("a refused install left (-want +got):\n%s", diff)
	}
	copyFile(t, script, filepath.Join(dir, "baton-plugin-agent"), 0o700)
	run(env, "plugin", "lock", dir)
	got = run(env, "plugin", "list")
	if prefix := "baton: plugin agent is not a Baton plugin (the plugin handshake failed: Unrecognized remote plugin message: hello\n"; got.Code != 1 || got.Stdout != header ||
		!strings.HasPrefix(got.Stderr, prefix) || !strings.HasSuffix(got.Stderr, fix) {
		t.Errorf("start a script: %+v\nwant stderr %q...%q", got, prefix, fix)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, to, mode)
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
