package agents

import (
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// npmRegistry is the least of an npm registry npm installs from: a
// packument per package at /NAME (the scope's slash escaped, as npm
// asks) and the tarballs, on 127.0.0.1.
type npmRegistry struct {
	*httptest.Server
	mu         sync.Mutex
	packuments map[string]map[string]any // name -> version -> manifest
	tarballs   map[string][]byte         // path -> tarball
}

func newNPMRegistry(t *testing.T) *npmRegistry {
	t.Helper()
	r := &npmRegistry{packuments: map[string]map[string]any{}, tarballs: map[string][]byte{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *npmRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.tarballs[req.URL.Path]; ok {
		w.Write(b)
		return
	}
	name, err := url.PathUnescape(strings.TrimPrefix(req.URL.EscapedPath(), "/"))
	versions, ok := r.packuments[name]
	if err != nil || !ok {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"not found"}`))
		return
	}
	latest := ""
	for v := range versions {
		latest = max(latest, v)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"name": name, "dist-tags": map[string]string{"latest": latest}, "versions": versions})
}

// publish packs a package (npm pack) of a command that prints its
// version, its arguments and GREETING, and serves it; it returns the
// tarball's integrity.
func (r *npmRegistry) publish(t *testing.T, name, version string, bin any) string {
	t.Helper()
	dir := t.TempDir()
	manifest := map[string]any{"name": name, "version": version, "bin": bin}
	pj, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/usr/bin/env node\nconsole.log(`" + name + " " + version + " ${process.argv.slice(2).join(' ')} GREETING=${process.env.GREETING}`)\n"
	for path, content := range map[string]string{"package.json": string(pj), "bin/agent.js": script, "bin/helper.js": script} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pack := exec.CommandContext(t.Context(), "npm", "pack", "--json", "--pack-destination", dir)
	pack.Dir = dir
	out, err := pack.Output()
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	var packed []struct{ Filename string }
	if err := json.Unmarshal(out, &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack said %s: %v", out, err)
	}
	tgz, err := os.ReadFile(filepath.Join(dir, packed[0].Filename))
	if err != nil {
		t.Fatal(err)
	}
	sha1sum, sha512sum := sha1.Sum(tgz), sha512.Sum512(tgz)
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:])
	path := "/tarballs/" + packed[0].Filename
	manifest["dist"] = map[string]string{"tarball": r.URL + path, "shasum": hex.EncodeToString(sha1sum[:]), "integrity": integrity}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.tarballs[path] = tgz
	if r.packuments[name] == nil {
		r.packuments[name] = map[string]any{}
	}
	r.packuments[name][version] = manifest
	return integrity
}

// useNPMRegistry points npm, in this test, at the registry, with a cache
// and a home of the test's own (no user configuration read).
func useNPMRegistry(t *testing.T, r *npmRegistry) {
	t.Helper()
	t.Setenv("npm_config_registry", r.URL+"/")
	t.Setenv("npm_config_cache", t.TempDir())
	t.Setenv("npm_config_update_notifier", "false")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("npm_config_userconfig", filepath.Join(t.TempDir(), "npmrc"))
}

func requireNPM(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not on PATH")
	}
}

// An npx agent is installed with npm at the exact version asked for (or
// the registry's), from its registry, into its own directory; its
// command is the package's bin of its name; the lockfile records the
// package's integrity; it runs. Upgrade moves it to the registry's
// version and removes the old one.
func TestInstallNPX(t *testing.T) {
	requireNPM(t)
	skipWithoutShell(t)
	reg := newNPMRegistry(t)
	const pkg = "@baton-test/echo-agent"
	bins := map[string]string{"echo-agent": "bin/agent.js", "echo-helper": "bin/helper.js"}
	old := reg.publish(t, pkg, "1.2.3", bins)
	current := reg.publish(t, pkg, "1.3.0", bins)
	useNPMRegistry(t, reg)

	data, clk := t.TempDir(), newClock(t0)
	cat := catalogOf(t, data, clk, Agent{ID: "echo", Name: "Echo", Version: "1.3.0", Distribution: Distribution{
		NPX: &Package{Package: pkg + "@1.3.0", Args: []string{"--acp"}, Env: map[string]string{"GREETING": "hello"}},
	}})

	in, err := Install(t.Context(), cat, "echo", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "agents", "echo", "1.2.3")
	want := Installation{
		ID: "echo", Version: "1.2.3", Kind: KindNPX, Source: pkg + "@1.2.3", Integrity: old, Dir: dir,
		Command:     []string{filepath.Join(dir, "node_modules", ".bin", "echo-agent"), "--acp"},
		Env:         map[string]string{"GREETING": "hello"},
		InstalledAt: t0,
	}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}
	if got := run(t, in); got != pkg+" 1.2.3 --acp GREETING=hello" {
		t.Errorf("the agent said %q", got)
	}
	locked, err := Installed(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Installation{"echo": want}, locked); diff != "" {
		t.Errorf("lockfile (-want +got):\n%s", diff)
	}

	clk.add(1)
	from, to, err := Upgrade(t.Context(), cat, "echo")
	if err != nil {
		t.Fatal(err)
	}
	if from != "1.2.3" || to.Version != "1.3.0" || to.Source != pkg+"@1.3.0" || to.Integrity != current {
		t.Errorf("upgrade: from %s to %+v", from, to)
	}
	if got := run(t, to); got != pkg+" 1.3.0 --acp GREETING=hello" {
		t.Errorf("the upgraded agent said %q", got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old version's files are still there: %v", err)
	}
	agentsDirHolds(t, data, ".lock", "agents.lock", "registry.json", "registry.meta.json", "echo")
}

// A version npm cannot install fails with npm's word for it, and leaves
// nothing behind; without npm, the error says what is missing.
func TestInstallNPXFails(t *testing.T) {
	requireNPM(t)
	reg := newNPMRegistry(t)
	reg.publish(t, "echo-agent", "1.0.0", "bin/agent.js")
	useNPMRegistry(t, reg)
	data := t.TempDir()
	cat := catalogOf(t, data, newClock(t0), Agent{ID: "echo", Version: "1.0.0", Distribution: Distribution{NPX: &Package{Package: "echo-agent"}}})

	_, err := Install(t.Context(), cat, "echo", "9.9.9")
	if err == nil || !strings.HasPrefix(err.Error(), "install agent echo: npm install echo-agent@9.9.9: exit status 1\n") ||
		!strings.Contains(err.Error(), "ETARGET") {
		t.Errorf("a version npm has not:\n%v", err)
	}
	agentsDirHolds(t, data, ".lock", "registry.json", "registry.meta.json")

	t.Setenv("PATH", t.TempDir())
	_, err = Install(t.Context(), cat, "echo", "")
	if err == nil || !strings.HasPrefix(err.Error(), "install agent echo: echo-agent@1.0.0 is an npm package, and npm is not on PATH (install Node.js, which has it): ") ||
		!errors.Is(err, exec.ErrNotFound) {
		t.Errorf("without npm:\n%v", err)
	}
}

func TestNPMSpecOf(t *testing.T) {
	for _, tc := range []struct {
		pkg, agentVersion, asked, want, err string
	}{
		{"@google/gemini-cli@0.27.3", "0.27.3", "", "@google/gemini-cli@0.27.3", ""},
		{"@google/gemini-cli@0.27.3", "0.27.3", "0.26.0", "@google/gemini-cli@0.26.0", ""},
		{"@zed-industries/claude-code-acp", "0.16.0", "", "@zed-industries/claude-code-acp@0.16.0", ""},
		{"opencode-ai@1.1.53", "1.1.53", "", "opencode-ai@1.1.53", ""},
		{"opencode-ai", "1.1.53", "", "opencode-ai@1.1.53", ""},
		{"a@^1.0.0", "1.0.0", "", "", `the registry's npm package "a@^1.0.0" is not pinned to an exact version: "^1.0.0" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`},
		{"-a", "1.0.0", "", "", `the registry's npm package "-a" is not a package name`},
		{"git+https://h/r.git", "1.0.0", "", "", `the registry's npm package "git+https://h/r.git" is not a package name`},
	} {
		got, err := npmSpecOf(Package{Package: tc.pkg}, tc.agentVersion, tc.asked)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) || (err == nil && got.String() != tc.want) {
			t.Errorf("npmSpecOf(%s, %s, %q) = %s, %v; want %s, %s", tc.pkg, tc.agentVersion, tc.asked, got, err, tc.want, tc.err)
		}
	}
}

func TestPickBin(t *testing.T) {
	for _, tc := range []struct {
		name, bin, want, err string
	}{
		{"@google/gemini-cli", `"dist/index.js"`, "gemini-cli", ""},
		{"@google/gemini-cli", `{"gemini": "dist/index.js"}`, "gemini", ""},
		{"@qwen-code/qwen-code", `{"qwen": "cli.js", "qwen-code": "cli.js"}`, "qwen-code", ""},
		{"tool", `{"a": "a.js", "b": "b.js"}`, "", "it installs the commands a, b, none named tool: which one is the agent is not known"},
		{"tool", `{}`, "", `its package.json "bin" is empty: it installs no command`},
		{"tool", ``, "", `its package.json has no "bin": it installs no command`},
		{"tool", `null`, "", `its package.json has no "bin": it installs no command`},
		{"tool", `["a"]`, "", `its package.json "bin" is neither a path nor a map of commands: json: cannot unmarshal array into Go value of type map[string]string`},
		{"tool", `{"../up": "a.js"}`, "", `command name "../up" is not a file name`},
	} {
		got, err := pickBin(tc.name, json.RawMessage(tc.bin))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("pickBin(%s, %s) = %q, %v; want %q, %s", tc.name, tc.bin, got, err, tc.want, tc.err)
		}
	}
}
