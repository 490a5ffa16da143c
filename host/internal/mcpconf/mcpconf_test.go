package mcpconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

func stdio(name string, env ...sdk.NameValue) Server {
	return Server{MCPServer: sdk.MCPServer{Name: name, Transport: sdk.MCPStdio, Command: "mcp-" + name, Env: env}}
}

// Add gives every change a new revision (a removed server added again
// too), sorts the servers by name and their env by variable (a later
// value of a variable winning); Save and Load keep it all, privately.
func TestAddSaveLoad(t *testing.T) {
	dir := t.TempDir()
	var f File
	for _, s := range []Server{
		stdio("web", sdk.NameValue{Name: "B", Value: "1"}, sdk.NameValue{Name: "A", Value: "x"}, sdk.NameValue{Name: "B", Value: "2"}),
		stdio("fs"),
	} {
		if replaced, err := f.Add(s); err != nil || replaced {
			t.Fatalf("add %s: %v %v", s.Name, replaced, err)
		}
	}
	if replaced, err := f.Add(stdio("fs")); err != nil || !replaced {
		t.Fatalf("add fs again: %v %v", replaced, err)
	}
	if !f.Remove("web") || f.Remove("web") {
		t.Fatal("remove web once")
	}
	if _, err := f.Add(stdio("web", sdk.NameValue{Name: "B", Value: "2"}, sdk.NameValue{Name: "A", Value: "x"})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add(Server{MCPServer: sdk.MCPServer{Name: "bad"}}); err == nil {
		t.Fatal("a server without a transport was added")
	}
	if err := Save(dir, f); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file is not private: %v %v", st.Mode(), err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := File{LastRevision: 4, Servers: []Server{
		{MCPServer: sdk.MCPServer{Name: "fs", Transport: sdk.MCPStdio, Command: "mcp-fs"}, Revision: 3},
		{MCPServer: sdk.MCPServer{Name: "web", Transport: sdk.MCPStdio, Command: "mcp-web",
			Env: []sdk.NameValue{{Name: "A", Value: "x"}, {Name: "B", Value: "2"}}}, Revision: 4},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("loaded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]domain.MCPServerRef{{Name: "fs", Transport: "stdio", Revision: 3}, {Name: "web", Transport: "stdio", Revision: 4}}, got.Refs()); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fs", "web"}, got.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	servers, err := got.Resolve([]domain.MCPServerRef{{Name: "web"}})
	if err != nil || len(servers) != 1 || servers[0].Env[1].Value != "2" {
		t.Errorf("resolve web: %+v %v", servers, err)
	}
	if _, err := got.Resolve([]domain.MCPServerRef{{Name: "gone"}}); err == nil || err.Error() != `MCP server "gone" was removed before the session opened` {
		t.Errorf("resolve a removed server: %v", err)
	}
	if empty, err := Load(t.TempDir()); err != nil || len(empty.Servers) != 0 {
		t.Errorf("no file: %+v %v", empty, err)
	}
}

// A file a person edited wrong is refused, naming the file and what is
// wrong; nothing is half-read.
func TestDecodeRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"servers":[`: "mcp.json: unexpected end of JSON input",
		`{"servers":[{"name":"a","transport":"stdio"}]}`:                                                              `mcp.json: MCP server "a" (stdio) has no command`,
		`{"servers":[{"name":"a","transport":"stdio","command":"x"},{"name":"a","transport":"stdio","command":"y"}]}`: `mcp.json: two MCP servers are named "a"`,
	} {
		if _, err := Decode([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

// The store reads the file again when it changed, and only then; a file
// gone is no server.
func TestStoreFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(dir)
	if f, err := s.Current(); err != nil || len(f.Servers) != 0 {
		t.Fatalf("no file: %+v %v", f, err)
	}
	var f File
	f.Add(stdio("fs"))
	if err := Save(dir, f); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Current(); err != nil || !cmp.Equal(got.Names(), []string{"fs"}) {
		t.Fatalf("after a save: %+v %v", got, err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(`{"servers":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); err == nil || !strings.Contains(err.Error(), "mcp.json") {
		t.Fatalf("a broken file: %v", err)
	}
	os.Remove(path)
	if got, err := s.Current(); err != nil || len(got.Servers) != 0 {
		t.Fatalf("file removed: %+v %v", got, err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); err == nil {
		t.Fatal("a directory where the file goes reads as servers")
	}
	if err := Save(filepath.Join(dir, "missing"), f); err == nil {
		t.Fatal("saved into a directory that does not exist")
	}
}

// FuzzDecode: whatever the file holds, Decode refuses it or gives servers
// that each pass their Check, of distinct names, sorted.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"servers":[{"name":"fs","transport":"stdio","command":"x","env":[{"name":"A","value":"1"}],"revision":1}],"lastRevision":1}`))
	f.Add([]byte(`{"servers":[{"name":"w","transport":"http","url":"https://h/mcp","headers":[{"name":"H","value":"v"}],"thread":"thr_1"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Decode(b)
		if err != nil {
			return
		}
		for i, s := range file.Servers {
			if err := s.Check(); err != nil {
				t.Fatalf("server %d decoded but fails its check: %v", i, err)
			}
			if i > 0 && file.Servers[i-1].Name >= s.Name {
				t.Fatalf("servers not sorted and distinct: %q then %q", file.Servers[i-1].Name, s.Name)
			}
		}
	})
}
