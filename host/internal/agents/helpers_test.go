package agents

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// writeRegistry writes a registry of these agents to a file and
// returns its path.
func writeRegistry(t *testing.T, agents ...Agent) string {
	t.Helper()
	if agents == nil {
		agents = []Agent{} // "agents": null is no registry
	}
	b, err := json.MarshalIndent(Registry{Version: "1.0.0", Agents: agents}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// catalogOf loads a catalog of these agents for the data dir, on clk.
func catalogOf(t *testing.T, data string, clk *clock, agents ...Agent) *Catalog {
	t.Helper()
	cat, err := Load(t.Context(), Options{DataDir: data, Source: writeRegistry(t, agents...), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// fileServer serves files by path on 127.0.0.1, counting requests.
type fileServer struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	requests int
}

func newFileServer(t *testing.T) *fileServer {
	t.Helper()
	s := &fileServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.files[r.URL.Path]
		s.requests++
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// put serves b at path and returns its URL.
func (s *fileServer) put(path string, b []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = b
	return s.URL + path
}

func (s *fileServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// entry is one entry of a test archive: a file (body, mode), a
// directory (dir), a symlink (link) or a hard link (hard).
type entry struct {
	name string
	body string
	mode int64
	dir  bool
	link string
	hard string
	kind byte // a tar type flag, to make an entry of another kind
}

// agentScript is an agent that prints its version, its arguments and
// the variable its registry entry sets.
func agentScript(version string) string {
	return "#!/bin/sh\necho \"agent " + version + " $* GREETING=$GREETING\"\n"
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(tarOf(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.kind != 0:
			h.Typeflag, h.Size = e.kind, 0
		case e.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case e.hard != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.hard, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zipOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch {
		case e.dir:
			h.SetMode(0o755 | os.ModeDir)
		case e.link != "":
			h.SetMode(0o777 | os.ModeSymlink)
			body = e.link
		case e.mode != 0:
			h.SetMode(os.FileMode(e.mode))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// run runs an installed agent as baton would, returning its output.
func run(t *testing.T, in Installation) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), in.Command[0], in.Command[1:]...)
	cmd.Env = in.Environ(os.Environ())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run %v: %v\n%s", in.Command, err, out)
	}
	return strings.TrimSpace(string(out))
}

// agentsDirHolds fails unless DATA/agents holds exactly these names.
func agentsDirHolds(t *testing.T, data string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(data, "agents"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("DATA/agents holds %v, want %v", got, want)
	}
}
