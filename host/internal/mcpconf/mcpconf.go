// Package mcpconf keeps the MCP servers of a data dir: configured once
// (`baton mcp add`), for every new thread or for one, and handed to each
// provider's plugin, in its provider's own form, when a session opens.
//
// The file, DATA/mcp.json, is private (0600): its env values and headers
// may be secrets. Nothing else the host writes holds them: the event log
// records a server by name, transport and revision (Ref), and whatever
// shows a server shows it Redacted.
package mcpconf

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/atomicfile"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk"
)

// FileName is the servers' file in the data dir.
const FileName = "mcp.json"

// Server is one configured MCP server.
type Server struct {
	sdk.MCPServer
	// Thread, when set, gives the server to that thread's runs only;
	// empty gives it to every thread's.
	Thread string `json:"thread,omitempty"`
	// Revision is bumped by every add of the server (a changed command,
	// URL, env or header): a session opened with an older revision is
	// replaced by the thread's next run.
	Revision int `json:"revision"`
}

// Ref is a server as the event log names it: never its secrets.
type Ref = domain.MCPServerRef

// Ref is the server's Ref.
func (s Server) Ref() Ref {
	return Ref{Name: s.Name, Transport: string(s.Transport), Thread: s.Thread, Revision: s.Revision}
}

// File is the servers' file.
type File struct {
	Servers []Server `json:"servers"`
	// LastRevision is the last revision given to a server, so that a
	// server removed and added again gets a new one.
	LastRevision int `json:"lastRevision"`
}

// Add adds s, or replaces the server of its name, with a new revision; it
// says whether one was replaced. s must pass its Check.
func (f *File) Add(s Server) (replaced bool, err error) {
	if err := s.Check(); err != nil {
		return false, err
	}
	f.LastRevision++
	s.Revision = f.LastRevision
	s.Env, s.Headers = sortedValues(s.Env), sortedValues(s.Headers)
	if i := slices.IndexFunc(f.Servers, func(o Server) bool { return o.Name == s.Name }); i >= 0 {
		f.Servers[i] = s
		return true, nil
	}
	f.Servers = append(f.Servers, s)
	slices.SortFunc(f.Servers, func(a, b Server) int { return cmp.Compare(a.Name, b.Name) })
	return false, nil
}

// sortedValues is vs sorted by name, a later value of a name replacing an
// earlier one.
func sortedValues(vs []sdk.NameValue) []sdk.NameValue {
	if len(vs) == 0 {
		return nil
	}
	m := make(map[string]string, len(vs))
	for _, v := range vs {
		m[v.Name] = v.Value
	}
	out := make([]sdk.NameValue, 0, len(m))
	for n, v := range m {
		out = append(out, sdk.NameValue{Name: n, Value: v})
	}
	slices.SortFunc(out, func(a, b sdk.NameValue) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Remove removes the server name; it says whether there was one.
func (f *File) Remove(name string) bool {
	i := slices.IndexFunc(f.Servers, func(o Server) bool { return o.Name == name })
	if i < 0 {
		return false
	}
	f.Servers = slices.Delete(f.Servers, i, i+1)
	return true
}

// Get is the server name.
func (f File) Get(name string) (Server, bool) {
	i := slices.IndexFunc(f.Servers, func(o Server) bool { return o.Name == name })
	if i < 0 {
		return Server{}, false
	}
	return f.Servers[i], true
}

// Names are the servers' names, sorted.
func (f File) Names() []string {
	out := make([]string, len(f.Servers))
	for i, s := range f.Servers {
		out[i] = s.Name
	}
	return out
}

// Refs are the servers' Refs, sorted by name.
func (f File) Refs() []Ref {
	out := make([]Ref, len(f.Servers))
	for i, s := range f.Servers {
		out[i] = s.Ref()
	}
	return out
}

// Load reads the data dir's servers (none: the file does not exist).
func Load(dataDir string) (File, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("read MCP servers: %w", err)
	}
	return Decode(b)
}

// Decode reads a servers' file, each server checked: an error names the
// file and what is wrong.
func Decode(b []byte) (File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("%s: %w", FileName, err)
	}
	seen := make(map[string]bool, len(f.Servers))
	for _, s := range f.Servers {
		if err := s.Check(); err != nil {
			return File{}, fmt.Errorf("%s: %w", FileName, err)
		}
		if seen[s.Name] {
			return File{}, fmt.Errorf("%s: two MCP servers are named %q", FileName, s.Name)
		}
		seen[s.Name] = true
	}
	slices.SortFunc(f.Servers, func(a, b Server) int { return cmp.Compare(a.Name, b.Name) })
	return f, nil
}

// Save writes the servers to the data dir, private, replacing the file
// whole (a reader sees the old file or the new one).
func Save(dataDir string, f File) error {
	if f.Servers == nil {
		f.Servers = []Server{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write MCP servers: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dataDir, FileName), append(b, '\n')); err != nil {
		return fmt.Errorf("write MCP servers: %w", err)
	}
	return nil
}

// Store is a data dir's servers as a running host reads them: the file
// again whenever it changed, else what was read before.
type Store struct {
	dir string

	mu    sync.Mutex
	mtime time.Time
	size  int64
	file  File
	err   error
}

// NewStore reads the servers of dataDir as they change.
func NewStore(dataDir string) *Store { return &Store{dir: dataDir} }

// Current is the servers now: the file read again when its modification
// time or size changed since the last read.
func (s *Store) Current() (File, error) {
	st, err := os.Stat(filepath.Join(s.dir, FileName))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.mtime, s.size, s.file, s.err = time.Time{}, 0, File{}, nil
		return File{}, nil
	case err != nil:
		return File{}, fmt.Errorf("read MCP servers: %w", err)
	case st.ModTime().Equal(s.mtime) && st.Size() == s.size:
		return s.file, s.err
	}
	s.file, s.err = Load(s.dir)
	s.mtime, s.size = st.ModTime(), st.Size()
	return s.file, s.err
}

// Resolve is the configured servers refs name, as the plugin is given
// them; a server no longer configured is an error naming it.
func (f File) Resolve(refs []Ref) ([]sdk.MCPServer, error) {
	var out []sdk.MCPServer
	for _, r := range refs {
		s, ok := f.Get(r.Name)
		if !ok {
			return nil, fmt.Errorf("MCP server %q was removed before the session opened", r.Name)
		}
		out = append(out, s.MCPServer)
	}
	return out, nil
}
