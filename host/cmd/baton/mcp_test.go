package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// baton mcp keeps the data dir's servers: add (stdio after --, http with
// --url; env from --env, the environment and --env-file; headers), list,
// show and remove, every secret printed as *** and the file private; bad
// input is refused naming what is wrong, and changes nothing.
func TestMCPCommands(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	envFile := filepath.Join(t.TempDir(), "db.env")
	os.WriteFile(envFile, []byte("# the database\nexport DB_USER=app\n\nDB_PASS='pa ss'\n"), 0o600)
	env := append(os.Environ(), "BATON_DATA="+data, "GH_TOKEN=ghp-secret")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return execBaton(t, env, "", args...)
	}
	for _, args := range [][]string{
		{"mcp", "add", "fs", "--env", "ROOT=/src", "--", "mcp-fs", "--root", "/src"},
		{"mcp", "add", "gh", "--env", "GH_TOKEN", "--", "github-mcp", "stdio"},
		{"mcp", "add", "db", "--env-file", envFile, "--", "db-mcp"},
		{"mcp", "add", "search", "--url", "https://127.0.0.1:9/mcp", "--header", "Authorization=Bearer hdr-secret"},
		{"mcp", "add", "fs", "--", "mcp-fs", "--root", "/src2"},
	} {
		if out, errOut, code := run(args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	out, _, _ := run("mcp", "list")
	want := `NAME    TRANSPORT  FOR           COMMAND OR URL
db      stdio      every thread  db-mcp
fs      stdio      every thread  mcp-fs --root /src2
gh      stdio      every thread  github-mcp stdio
search  http       every thread  https://127.0.0.1:9/mcp
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	out, _, _ = run("mcp", "show", "db")
	want = `name       db
transport  stdio
for        every thread
revision   3
command    db-mcp
env        DB_PASS=***
env        DB_USER=***
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("show (-want +got):\n%s", diff)
	}
	out, _, _ = run("mcp", "list", "--json")
	if !strings.Contains(out, `"headers":[{"name":"Authorization","value":"***"}]`) || !strings.Contains(out, `"revision":5`) {
		t.Errorf("list --json: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(data, "mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"ghp-secret", "hdr-secret", "pa ss"} {
		if !strings.Contains(string(b), secret) {
			t.Errorf("the file lost %q", secret)
		}
	}
	if st, _ := os.Stat(filepath.Join(data, "mcp.json")); st.Mode().Perm() != 0o600 {
		t.Errorf("mcp.json is %v", st.Mode())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "add", "x"}, "baton: mcp add: give the server's command after -- (stdio), or --url URL (http)\n"},
		{[]string{"mcp", "add", "x", "cmd"}, "baton: mcp add: a server's command goes after --: baton mcp add x -- cmd\n"},
		{[]string{"mcp", "add", "x", "--url", "http://h", "--", "cmd"}, "baton: mcp add: give a command (after --) or --url, not both\n"},
		{[]string{"mcp", "add", "x", "--url", "http://h", "--env", "A=1"}, "baton: mcp add: --env and --env-file are a stdio server's (its command's environment); an http server takes --header\n"},
		{[]string{"mcp", "add", "x y", "--", "cmd"}, "baton: mcp add: MCP server name \"x y\": use letters, digits, '-' and '_'\n"},
		{[]string{"mcp", "add", "x", "--env", "NOPE_NOT_SET", "--", "cmd"}, "baton: mcp add: --env NOPE_NOT_SET: NOPE_NOT_SET is not set in this environment (give --env NOPE_NOT_SET=VALUE)\n"},
		{[]string{"mcp", "add", "x", "--header", "Authorization", "--url", "http://h"}, "baton: mcp add: --header: want NAME=VALUE, got \"Authorization\"\n"},
		{[]string{"mcp", "add", "x", "--thread", "thr_none", "--", "cmd"}, "baton: mcp add: --thread thr_none: no such thread (baton threads lists them)\n"},
		{[]string{"mcp", "show", "nope"}, "baton: mcp show: no MCP server is named \"nope\" (baton mcp list shows them)\n"},
		{[]string{"mcp", "remove", "nope"}, "baton: mcp remove: no MCP server is named \"nope\" (baton mcp list shows them)\n"},
		{[]string{"run", "--provider", "acp", "--mcp", "fs", "--no-mcp", "x"}, "baton: run: give --mcp or --no-mcp, not both\n"},
	} {
		_, errOut, code := run(c.args...)
		if code != 2 || errOut != c.want {
			t.Errorf("%v: exit %d, %q; want 2, %q", c.args, code, errOut, c.want)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(data, "mcp.json")); string(after) != string(b) {
		t.Error("a refused command changed the file")
	}
	if out, _, code := run("mcp", "remove", "gh"); code != 0 || out != "removed MCP server gh; each thread's next run goes without it\n" {
		t.Errorf("remove: %d %q", code, out)
	}
	out, _, _ = run("mcp", "list")
	if strings.Contains(out, "gh ") {
		t.Errorf("gh still listed:\n%s", out)
	}
}

// An env file's line that is not KEY=VALUE is refused naming the file and
// line, quoting only its start (the rest may be a secret).
func TestMCPEnvFileRefused(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bad.env")
	os.WriteFile(f, []byte("A=1\nnot a pair sekrit\n"), 0o600)
	_, errOut, code := baton(t, "mcp", "add", "x", "--env-file", f, "--", "cmd")
	want := "baton: mcp add: --env-file " + f + ":2: want KEY=VALUE, got \"not ...\"\n"
	if code != 2 || errOut != want {
		t.Errorf("exit %d, %q; want %q", code, errOut, want)
	}
}
