package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/baton-run/baton/host/internal/atomicfile"
)

// LockfileName is the record of the installed agents, in
// DataDir/agents: JSON, private (0600), replaced whole on each change.
const LockfileName = "agents.lock"

// lockfileVersion is the lockfile's format; a reader refuses a newer one.
const lockfileVersion = 1

// ErrNotInstalled is the error of an agent that is not installed.
var ErrNotInstalled = errors.New("not installed")

// Installation is one installed agent, as the lockfile records it.
type Installation struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Kind    Kind   `json:"kind"`
	// Source is what was installed: the npm package as PACKAGE@VERSION,
	// or the archive's URL.
	Source string `json:"source"`
	// SHA256 is the archive's SHA-256 in hex (binary).
	SHA256 string `json:"sha256,omitempty"`
	// Integrity is the npm package's integrity as npm recorded it
	// ("sha512-..."); empty when npm recorded none.
	Integrity string `json:"integrity,omitempty"`
	// Dir is the install's directory, DataDir/agents/ID/VERSION.
	Dir string `json:"dir"`
	// Command is the agent's argv: the executable's absolute path, then
	// the registry's arguments.
	Command []string `json:"command"`
	// Env is what the registry adds to the agent's environment.
	Env         map[string]string `json:"env,omitempty"`
	InstalledAt time.Time         `json:"installedAt"`
}

// Environ is base (an os.Environ) with the agent's Env set, in sorted
// order after it, so that the agent's values win.
func (in Installation) Environ(base []string) []string {
	env := slices.Clone(base)
	for _, k := range slices.Sorted(maps.Keys(in.Env)) {
		env = append(env, k+"="+in.Env[k])
	}
	return env
}

// lockfile is the JSON form of agents.lock.
type lockfile struct {
	Version int                     `json:"version"`
	Agents  map[string]Installation `json:"agents"`
}

// readLockfile reads dir's lockfile; a missing one is empty.
func readLockfile(dir string) (lockfile, error) {
	lf := lockfile{Version: lockfileVersion, Agents: map[string]Installation{}}
	path := filepath.Join(dir, LockfileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return lf, nil
	}
	if err != nil {
		return lf, fmt.Errorf("read agents lockfile: %w", err)
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		return lf, fmt.Errorf("read agents lockfile %s: %w", path, err)
	}
	if lf.Version > lockfileVersion {
		return lf, fmt.Errorf("read agents lockfile %s: format %d is newer than this baton's (%d)", path, lf.Version, lockfileVersion)
	}
	if lf.Agents == nil {
		lf.Agents = map[string]Installation{}
	}
	return lf, nil
}

func writeLockfile(dir string, lf lockfile) error {
	lf.Version = lockfileVersion
	b, err := json.MarshalIndent(lf, "", "  ")
	if err != nil {
		return fmt.Errorf("write agents lockfile: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, LockfileName), append(b, '\n')); err != nil {
		return fmt.Errorf("write agents lockfile: %w", err)
	}
	return nil
}

// Installed returns the installed agents by id.
func Installed(dataDir string) (map[string]Installation, error) {
	lf, err := readLockfile(agentsDir(dataDir))
	return lf.Agents, err
}

// Lookup returns the installed agent of that id. It fails with
// ErrNotInstalled, naming the command that installs it, when the agent
// is not installed or its executable is gone.
func Lookup(dataDir, id string) (Installation, error) {
	if err := CheckID(id); err != nil {
		return Installation{}, err
	}
	lf, err := readLockfile(agentsDir(dataDir))
	if err != nil {
		return Installation{}, err
	}
	in, ok := lf.Agents[id]
	if !ok {
		return in, fmt.Errorf("agent %s is %w: install it with 'baton agents install %s'", id, ErrNotInstalled, id)
	}
	if len(in.Command) == 0 {
		return in, fmt.Errorf("agent %s: the lockfile records no command: reinstall it with 'baton agents install %s'", id, id)
	}
	if _, err := os.Stat(in.Command[0]); err != nil {
		return in, fmt.Errorf("agent %s %s is %w: its command is gone (%v): reinstall it with 'baton agents install %s'",
			id, in.Version, ErrNotInstalled, err, id)
	}
	return in, nil
}

// Remove uninstalls an agent: its lockfile entry, then its files. It
// waits for an install or removal in progress to end first.
func Remove(dataDir, id string) error {
	if err := CheckID(id); err != nil {
		return fmt.Errorf("remove agent: %w", err)
	}
	dir := agentsDir(dataDir)
	unlock, err := lockAgents(context.Background(), dir)
	if err != nil {
		return fmt.Errorf("remove agent %s: %w", id, err)
	}
	defer unlock()
	lf, err := readLockfile(dir)
	if err != nil {
		return fmt.Errorf("remove agent %s: %w", id, err)
	}
	if _, ok := lf.Agents[id]; !ok {
		// Files without an entry are an install that never finished.
		if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
			return fmt.Errorf("remove agent %s: %w", id, err)
		}
		return fmt.Errorf("remove agent %s: %w", id, ErrNotInstalled)
	}
	delete(lf.Agents, id)
	if err := writeLockfile(dir, lf); err != nil {
		return fmt.Errorf("remove agent %s: %w", id, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
		return fmt.Errorf("remove agent %s: its entry is gone, but not all its files: %w", id, err)
	}
	return nil
}
