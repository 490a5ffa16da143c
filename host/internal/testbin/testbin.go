// Package testbin provides the binaries integration tests run as separate
// processes: the replay peer, every plugin, and (for the CLI's tests) baton
// itself, in one directory whose plugins are locked (pluginhost.Lock).
//
// `make build` and `make cover` build them once and name them with
// $BATON_BIN (and $BATON_REPLAYPEER); without those, Build builds them into
// a temp dir with the go command, which sees the test's environment (so
// GOFLAGS from make cover applies to it as well).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/baton-run/baton/host/internal/pluginhost"
)

// Bins is where a test binary's binaries are.
type Bins struct {
	// Dir holds baton-plugin-* with plugins.lock (and baton, if built).
	Dir string
	// Peer is the replay peer.
	Peer string
	// temp is the directory Build made, removed by Remove.
	temp string
}

// Build finds or builds the binaries, root being the repository root. With
// withBaton it also builds the baton CLI (ignored when $BATON_BIN names
// them: make build has built it there).
func Build(root string, withBaton bool) (Bins, error) {
	if bin := os.Getenv("BATON_BIN"); bin != "" {
		b := Bins{Dir: bin, Peer: filepath.Join(bin, "replaypeer")}
		if p := os.Getenv("BATON_REPLAYPEER"); p != "" {
			b.Peer = p
		}
		return b, nil
	}
	dir, err := os.MkdirTemp("", "baton-test-bin-")
	if err != nil {
		return Bins{}, err
	}
	b := Bins{Dir: dir, Peer: filepath.Join(dir, "replaypeer"), temp: dir}
	type build struct{ dir, out, pkg string }
	builds := []build{{"replaypeer", "replaypeer", "."}}
	if withBaton {
		builds = append(builds, build{"host", "baton", "./cmd/baton"})
	}
	mods, err := filepath.Glob(filepath.Join(root, "plugins", "*", "go.mod"))
	if err != nil {
		b.Remove()
		return Bins{}, err
	}
	for _, m := range mods {
		name := filepath.Base(filepath.Dir(m))
		builds = append(builds, build{"plugins/" + name, pluginhost.BinaryPrefix + name, "."})
	}
	for _, bd := range builds {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, bd.out), bd.pkg)
		cmd.Dir = filepath.Join(root, bd.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Remove()
			return Bins{}, fmt.Errorf("build %s: %v\n%s", bd.dir, err, out)
		}
	}
	if _, err := pluginhost.Lock(dir); err != nil {
		b.Remove()
		return Bins{}, fmt.Errorf("lock %s: %w", dir, err)
	}
	return b, nil
}

// Remove removes what Build built (nothing, for $BATON_BIN's).
func (b Bins) Remove() {
	if b.temp != "" {
		os.RemoveAll(b.temp)
	}
}

// Plugin builds the plugin program pkg (a main package of the host module,
// as "./internal/testbin/crashplugin") into dir once for each name, as
// baton-plugin-<name>, and locks dir. A test plugin that no `make build`
// makes is built so.
func Plugin(root, pkg, dir string, names ...string) error {
	if len(names) == 0 {
		return fmt.Errorf("build %s: no plugin name", pkg)
	}
	first := filepath.Join(dir, pluginhost.BinaryPrefix+names[0])
	cmd := exec.Command("go", "build", "-o", first, pkg)
	cmd.Dir = filepath.Join(root, "host")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	b, err := os.ReadFile(first)
	if err != nil {
		return err
	}
	for _, n := range names[1:] {
		if err := os.WriteFile(filepath.Join(dir, pluginhost.BinaryPrefix+n), b, 0o700); err != nil {
			return err
		}
	}
	if _, err := pluginhost.Lock(dir); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	return nil
}
