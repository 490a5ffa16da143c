package agents

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/registry.json is three entries of the real registry as
// published (codex-acp and opencode: binaries; gemini: npm).
func TestParseTheRealRegistry(t *testing.T) {
	b, err := os.ReadFile("testdata/registry.json")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range reg.Agents {
		ids = append(ids, a.ID)
	}
	if diff := cmp.Diff([]string{"codex-acp", "gemini", "opencode"}, ids); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	gemini, ok := reg.Agent("gemini")
	if !ok {
		t.Fatal("no gemini")
	}
	want := Agent{
		ID: "gemini", Name: "Gemini CLI", Version: "0.27.3", Description: "Google's official CLI for Gemini",
		Repository: "https://github.com/google-gemini/gemini-cli", Authors: []string{"Google"}, License: "Apache-2.0",
		Distribution: Distribution{NPX: &Package{Package: "@google/gemini-cli@0.27.3", Args: []string{"--experimental-acp"}}},
	}
	if diff := cmp.Diff(want, gemini); diff != "" {
		t.Errorf("gemini (-want +got):\n%s", diff)
	}
	codex, _ := reg.Agent("codex-acp")
	if diff := cmp.Diff(BinaryTarget{
		Archive: "https://github.com/zed-industries/codex-acp/releases/download/v0.9.2/codex-acp-0.9.2-x86_64-unknown-linux-gnu.tar.gz",
		Cmd:     "./codex-acp",
	}, codex.Distribution.Binary["linux-x86_64"]); diff != "" {
		t.Errorf("codex-acp on linux-x86_64 (-want +got):\n%s", diff)
	}
	if len(codex.Distribution.Binary) != 6 {
		t.Errorf("codex-acp has %d platforms, want 6", len(codex.Distribution.Binary))
	}
	opencode, _ := reg.Agent("opencode")
	if k, _ := opencode.Distribution.Choose("windows-aarch64"); k != "" {
		t.Errorf("opencode has no windows-aarch64 archive, but Choose says %q", k)
	}
	if _, ok := reg.Agent("nope"); ok {
		t.Error("found an agent the registry does not list")
	}
}

// A registry that is not what the format says is refused, naming the
// line and column of the value at fault, its path, and what is wrong.
func TestParseRefusesAMalformedRegistry(t *testing.T) {
	const gemini = `{"id": "gemini", "version": "1.0.0", "distribution": {"npx": {"package": "g"}}}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", `{"version": "1.0.0",` + "\n" + `  "agents": [}`,
			`line 2, column 14: invalid JSON: want a value, found '}'`},
		{"a missing colon", `{"version" "1.0.0"}`,
			`line 1, column 12: invalid JSON: want ':' after the member name, found '"'`},
		{"truncated", `{"version": "1.0.0", "agents": [` + gemini,
			`line 1, column 112: invalid JSON: want ',' or ']' after an array element, found the end of the input`},
		{"a trailing comma", `{"version": "1.0.0", "agents": [],}`,
			`line 1, column 35: invalid JSON: want a member name (a string), found '}'`},
		{"two values", `{"version": "1.0.0", "agents": []} {}`,
			`line 1, column 36: invalid JSON: '{' after the top-level value`},
		{"a bad literal", `{"version": "1.0.0", "agents": [tru]}`,
			`line 1, column 36: invalid JSON: want true, found ']'`},
		{"a bad escape", `{"version": "1.0\q"}`,
			`line 1, column 18: invalid JSON: invalid escape '\' 'q' in a string`},
		{"a control character", "{\"version\": \"1.0\t\"}",
			`line 1, column 17: invalid JSON: control character byte 0x09 in a string (escape it)`},
		{"a bad number", `{"version": -x}`,
			`line 1, column 14: invalid JSON: want a digit in a number, found 'x'`},
		{"a duplicate member", `{"version": "1.0.0", "version": "1.0.0"}`,
			`line 1, column 22: invalid JSON: duplicate member "version"`},
		{"a duplicate among many members", `{"version": "1.0.0", "agents": [], "x": {"k00": 0,"k01": 0,"k02": 0,"k03": 0,"k04": 0,"k05": 0,"k06": 0,"k07": 0,"k08": 0,"k09": 0,"k10": 0,"k11": 0,"k12": 0,"k13": 0,"k14": 0,"k15": 0,"k16": 0,"k17": 0,"k18": 0,"k19": 0, "k05": 1}}`,
			`line 1, column 223: invalid JSON: duplicate member "k05"`},
		{"not an object", `[]`,
			`line 1, column 1: an array, want an object`},
		{"no version", `{"agents": []}`,
			`line 1, column 1: no "version"`},
		{"another major version", `{"version": "2.0.0", "agents": []}`,
			`line 1, column 13: version: format "2.0.0", want 1.x`},
		{"no agents", `{"version": "1.0.0"}`,
			`line 1, column 1: no "agents"`},
		{"agents not an array", `{"version": "1.0.0", "agents": {}}`,
			`line 1, column 32: agents: an object, want an array`},
		{"an agent not an object", `{"version": "1.0.0", "agents": ["gemini"]}`,
			`line 1, column 33: agents[0]: a string, want an object`},
		{"no id", "{\"version\": \"1.0.0\", \"agents\": [\n  " + gemini + ",\n  {\"version\": \"1.0.0\", \"distribution\": {}}]}",
			`line 3, column 3: agents[1]: no "id"`},
		{"a null id", `{"version": "1.0.0", "agents": [{"id": null, "version": "1.0.0", "distribution": {}}]}`,
			`line 1, column 33: agents[0]: no "id"`},
		{"no version of an agent", `{"version": "1.0.0", "agents": [{"id": "a", "distribution": {}}]}`,
			`line 1, column 33: agents[0]: no "version"`},
		{"no distribution", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0"}]}`,
			`line 1, column 33: agents[0]: no "distribution"`},
		{"an id of the wrong type", `{"version": "1.0.0", "agents": [{"id": 7, "version": "1.0.0", "distribution": {}}]}`,
			`line 1, column 40: agents[0].id: a number, want a string`},
		{"a bad id", "{\"version\": \"1.0.0\", \"agents\": [\n  {\"id\": \"Gemini\", \"version\": \"1.0.0\", \"distribution\": {}}]}",
			`line 2, column 10: agents[0].id: "Gemini" is not an agent id (lower-case letters, digits and '-', starting with a letter)`},
		{"a duplicate id", "{\"version\": \"1.0.0\", \"agents\": [\n  " + gemini + "],\n \"extensions\": [\n  " + gemini + "]}",
			`line 4, column 10: extensions[0].id: duplicate id "gemini" (first at line 2, column 10)`},
		{"a bad version", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0", "distribution": {}}]}`,
			`line 1, column 56: agents[0].version: "1.0" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`},
		{"a version that is a path", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0/../../x", "distribution": {}}]}`,
			`line 1, column 56: agents[0].version: "1.0.0/../../x" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`},
		{"authors not strings", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "authors": ["x", 2], "distribution": {}}]}`,
			`line 1, column 82: agents[0].authors[1]: a number, want a string`},
		{"distribution not an object", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": []}]}`,
			`line 1, column 81: agents[0].distribution: an array, want an object`},
		{"an unknown platform", "{\"version\": \"1.0.0\", \"agents\": [{\"id\": \"a\", \"version\": \"1.0.0\", \"distribution\": {\"binary\": {\n" +
			`  "linux-x86_64": {"archive": "https://h/a.tgz", "cmd": "./a"},` + "\n" + `  "linux-x64": {"archive": "https://h/a.tgz", "cmd": "./a"}}}}]}`,
			`line 3, column 3: agents[0].distribution.binary: unknown platform "linux-x64" (known: darwin-aarch64, darwin-x86_64, linux-aarch64, linux-x86_64, windows-aarch64, windows-x86_64)`},
		{"no platform", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {}}}]}`,
			`line 1, column 92: agents[0].distribution.binary: no platform`},
		{"a null target", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {"linux-x86_64": null}}}]}`,
			`line 1, column 109: agents[0].distribution.binary.linux-x86_64: null, want an object`},
		{"a target without an archive", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {"linux-x86_64": {"cmd": "./a"}}}}]}`,
			`line 1, column 109: agents[0].distribution.binary.linux-x86_64: no "archive"`},
		{"an empty command", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {"linux-x86_64": {"archive": "https://h/a", "cmd": ""}}}}]}`,
			`line 1, column 143: agents[0].distribution.binary.linux-x86_64.cmd: empty`},
		{"a bad sha256", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {"linux-x86_64": {"archive": "https://h/a", "cmd": "a", "sha256": "abc"}}}}]}`,
			`line 1, column 158: agents[0].distribution.binary.linux-x86_64.sha256: "abc" is not a SHA-256 (64 hex digits)`},
		{"args not an array", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"npx": {"package": "a", "args": "--acp"}}}]}`,
			`line 1, column 114: agents[0].distribution.npx.args: a string, want an array`},
		{"an env value not a string", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"uvx": {"package": "a", "env": {"X": 1}}}}]}`,
			`line 1, column 119: agents[0].distribution.uvx.env.X: a number, want a string`},
		{"an env name with '='", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"uvx": {"package": "a", "env": {"X=Y": "1"}}}}]}`,
			`line 1, column 114: agents[0].distribution.uvx.env: "X=Y" is not an environment variable name`},
		{"a package without a name", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"npx": {"args": []}}}]}`,
			`line 1, column 89: agents[0].distribution.npx: no "package"`},
		{"an empty package", `{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"npx": {"package": ""}}}]}`,
			`line 1, column 101: agents[0].distribution.npx.package: empty`},
		{"a column counted in characters", `{"version": "1.0.0", "agents": [{"name": "Ünïcödé", "id": "a", "version": "1", "distribution": {}}]}`,
			`line 1, column 75: agents[0].version: "1" is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)`},
		{"too deep", `{"version": "1.0.0", "agents": [], "x": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
			`line 1, column 140: invalid JSON: nested more than 100 deep`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("accepted: %+v", reg)
			}
			if err.Error() != tc.want {
				t.Errorf("refused with\n%s\nwant\n%s", err, tc.want)
			}
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Errorf("the error is a %T, not a *ParseError", err)
			}
		})
	}
}

// What a newer registry adds (members, distribution kinds) is ignored,
// null is absence, and empty lists and maps read as nil.
func TestParseToleratesWhatItDoesNotKnow(t *testing.T) {
	in := `{
  "version": "1.3.0",
  "$schema": "https://example.com/registry.schema.json",
  "agents": [
    {"id": "a", "version": "1.0.0-beta.1+build.5", "name": null, "mascot": {"kind": "owl"},
     "authors": [], "distribution": {"docker": {"image": "a:1"}, "npx": {"package": "a", "args": [], "env": {}, "hash": 1},
     "binary": {"linux-x86_64": {"archive": "https://h/a.zip", "cmd": "./a", "sha256": "` + strings.Repeat("AB", 32) + `", "signature": "x"}}}}
  ],
  "extensions": null,
  "models": [1, 2, 3]
}`
	reg, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Registry{Version: "1.3.0", Agents: []Agent{{
		ID: "a", Version: "1.0.0-beta.1+build.5",
		Distribution: Distribution{
			NPX:    &Package{Package: "a"},
			Binary: map[string]BinaryTarget{"linux-x86_64": {Archive: "https://h/a.zip", Cmd: "./a", SHA256: strings.Repeat("ab", 32)}},
		},
	}}}
	if diff := cmp.Diff(want, reg); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	empty, err := Parse([]byte(`{"version": "1.0.0", "agents": []}`))
	if err != nil || empty.Agents == nil || len(empty.Agents) != 0 {
		t.Errorf("an empty registry: %+v %v", empty, err)
	}
}

func TestChoose(t *testing.T) {
	bin := map[string]BinaryTarget{"linux-x86_64": {Archive: "https://h/a", Cmd: "a"}}
	npx, uvx := &Package{Package: "a"}, &Package{Package: "a"}
	for _, tc := range []struct {
		d    Distribution
		want Kind
	}{
		{Distribution{Binary: bin, NPX: npx, UVX: uvx}, KindBinary},
		{Distribution{Binary: map[string]BinaryTarget{"darwin-aarch64": {}}, NPX: npx, UVX: uvx}, KindNPX},
		{Distribution{UVX: uvx}, KindUVX},
		{Distribution{}, ""},
	} {
		if got, ok := tc.d.Choose("linux-x86_64"); got != tc.want || ok != (tc.want != "") {
			t.Errorf("Choose(%+v) = %q %v, want %q", tc.d, got, ok, tc.want)
		}
	}
}

func TestPlatformKeys(t *testing.T) {
	for _, tc := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "linux-x86_64"},
		{"linux", "arm64", "linux-aarch64"},
		{"darwin", "arm64", "darwin-aarch64"},
		{"darwin", "amd64", "darwin-x86_64"},
		{"windows", "amd64", "windows-x86_64"},
		{"freebsd", "riscv64", "freebsd-riscv64"},
	} {
		if got := platformKey(tc.goos, tc.goarch); got != tc.want {
			t.Errorf("platformKey(%s, %s) = %s, want %s", tc.goos, tc.goarch, got, tc.want)
		}
	}
	if p := Platform(); !strings.Contains(p, "-") {
		t.Errorf("Platform() = %q", p)
	}
}

// FuzzParse: whatever the bytes, Parse refuses them with a position
// inside the input, or accepts a registry that survives a trip through
// its JSON form unchanged.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/registry.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"npx": {"package": "a@1.0.0", "env": {"K": "v"}}, "uvx": {"package": "b"}}}], "extensions": [{"id": "e", "version": "0.1.0", "distribution": {}}]}`))
	f.Add([]byte(`{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {"binary": {"linux-x86_64": {"archive": "u", "cmd": "c", "args": ["x"], "sha256": "` + strings.Repeat("0", 64) + `"}}}}]}`))
	f.Add([]byte(`{"version": "1.0.0", "agents": [], "x": [1.5e3, -0, true, false, null, "\u00e9\ud83d\ude00"]}`))
	f.Add([]byte(`{"version": "1.0.0", "agents": [{"id": "a", "version": "1.0.0", "distribution": {}}, {"id": "a"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reg, err := Parse(b)
		if err != nil {
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Fatalf("refused with a %T: %v", err, err)
			}
			lines := strings.Count(string(b), "\n") + 1
			if perr.Line < 1 || perr.Line > lines || perr.Column < 1 {
				t.Fatalf("refused at line %d, column %d of %d lines: %v", perr.Line, perr.Column, lines, err)
			}
			return
		}
		out, err := json.Marshal(reg)
		if err != nil {
			t.Fatalf("marshal an accepted registry: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("the JSON of an accepted registry is refused: %v\n%s", err, out)
		}
		if diff := cmp.Diff(reg, again); diff != "" {
			t.Fatalf("changed by a trip through JSON (-first +second):\n%s", diff)
		}
	})
}
