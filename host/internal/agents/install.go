package agents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/baton-run/baton/host/internal/filelock"
)

// stagingPrefix starts the name of every directory and file an install
// works in, in DataDir/agents, before it moves the result into place.
// Under the agents lock, one that is there is left by an install that
// never finished, and goes.
const stagingPrefix = ".install-"

// staged is what a kind's installer leaves in the staging directory.
type staged struct {
	cmd       string // the executable, relative to the install's directory
	args      []string
	env       map[string]string
	source    string
	sha256    string
	integrity string
}

// Install installs an agent of the catalog into
// DataDir/agents/ID/VERSION and records it in the lockfile, replacing
// the agent's earlier install (whose files go once the new one is in
// place). Version "" is the registry's; another version is installed
// only from npm (the registry lists the archives of its own version
// only). The kind is the one Distribution.Choose picks for Platform();
// uvx is not supported yet (an error wrapping errors.ErrUnsupported).
// An install that fails leaves nothing behind. Install waits for another
// install or removal in the data directory to end first, until ctx ends.
func Install(ctx context.Context, cat *Catalog, id, version string) (Installation, error) {
	dir, err := filepath.Abs(agentsDir(cat.dataDir))
	if err != nil {
		return Installation{}, fmt.Errorf("install agent %s: %w", id, err)
	}
	unlock, err := lockAgents(ctx, dir)
	if err != nil {
		return Installation{}, fmt.Errorf("install agent %s: %w", id, err)
	}
	defer unlock()
	return install(ctx, cat, dir, id, version)
}

// Upgrade installs the registry's version of an installed agent (from
// is the version it replaces) and removes the old version's files. An
// agent already at the registry's version is left as it is (from is
// to.Version), unless its command is gone: then it is installed again.
// An agent that is not installed is an ErrNotInstalled.
func Upgrade(ctx context.Context, cat *Catalog, id string) (from string, to Installation, err error) {
	if err := CheckID(id); err != nil {
		return "", to, fmt.Errorf("upgrade agent: %w", err)
	}
	dir, err := filepath.Abs(agentsDir(cat.dataDir))
	if err != nil {
		return "", to, fmt.Errorf("upgrade agent %s: %w", id, err)
	}
	unlock, err := lockAgents(ctx, dir)
	if err != nil {
		return "", to, fmt.Errorf("upgrade agent %s: %w", id, err)
	}
	defer unlock()
	lf, err := readLockfile(dir)
	if err != nil {
		return "", to, fmt.Errorf("upgrade agent %s: %w", id, err)
	}
	cur, ok := lf.Agents[id]
	if !ok {
		return "", to, fmt.Errorf("upgrade agent %s: it is %w: install it with 'baton agents install %s'", id, ErrNotInstalled, id)
	}
	a, ok := cat.Registry.Agent(id)
	if !ok {
		return cur.Version, to, fmt.Errorf("upgrade agent %s: the registry (%s) no longer lists it", id, cat.Source)
	}
	if cur.Version == a.Version && len(cur.Command) > 0 {
		if _, err := os.Stat(cur.Command[0]); err == nil {
			return cur.Version, cur, nil
		}
	}
	to, err = install(ctx, cat, dir, id, "")
	return cur.Version, to, err
}

// install is Install with the lock held; dir is the absolute agents
// directory.
func install(ctx context.Context, cat *Catalog, dir, id, version string) (Installation, error) {
	fail := func(err error) (Installation, error) {
		return Installation{}, fmt.Errorf("install agent %s: %w", id, err)
	}
	if err := CheckID(id); err != nil {
		return fail(err)
	}
	a, ok := cat.Registry.Agent(id)
	if !ok {
		return fail(fmt.Errorf("the registry (%s) has no agent %q", cat.Source, id))
	}
	if version != "" {
		if err := CheckVersion(version); err != nil {
			return fail(err)
		}
	}
	platform := Platform()
	kind, ok := a.Distribution.Choose(platform)
	if !ok {
		return fail(errors.New("the registry lists no distribution of it that baton knows (binary, npx or uvx)"))
	}

	var npm npmSpec
	switch kind {
	case KindUVX:
		return fail(fmt.Errorf("it is distributed for %s as a PyPI package (uvx) only, and baton does not install those yet: %w",
			platform, errors.ErrUnsupported))
	case KindBinary:
		if version != "" && version != a.Version {
			return fail(fmt.Errorf("version %s: the registry lists the archive of version %s only", version, a.Version))
		}
		version = a.Version
	case KindNPX:
		var err error
		if npm, err = npmSpecOf(*a.Distribution.NPX, a.Version, version); err != nil {
			return fail(err)
		}
		version = npm.version
	}

	removeStaging(dir)
	staging, err := os.MkdirTemp(dir, stagingPrefix+id+"-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(staging) // gone already when the install is in place
	var st staged
	switch kind {
	case KindBinary:
		st, err = installBinary(ctx, cat.client, staging, a.Distribution.Binary[platform])
	case KindNPX:
		st, err = installNPM(ctx, staging, npm, *a.Distribution.NPX)
	}
	if err != nil {
		return fail(err)
	}
	final := filepath.Join(dir, id, version)
	in := Installation{
		ID:          id,
		Version:     version,
		Kind:        kind,
		Source:      st.source,
		SHA256:      st.sha256,
		Integrity:   st.integrity,
		Dir:         final,
		Command:     append([]string{filepath.Join(final, st.cmd)}, st.args...),
		Env:         maps.Clone(st.env), // not the catalog's
		InstalledAt: cat.now(),
	}
	if err := place(dir, staging, in); err != nil {
		return fail(err)
	}
	if err := removeOthers(dir, id, version); err != nil {
		return in, fmt.Errorf("install agent %s %s: installed, but the files of its other versions are not all gone: %w", id, version, err)
	}
	return in, nil
}

// place moves the staging directory to in.Dir and records in in the
// lockfile; it changes nothing when either fails. An install of the
// version there already replaces it.
func place(dir, staging string, in Installation) error {
	lf, err := readLockfile(dir)
	if err != nil {
		return err
	}
	idDir := filepath.Dir(in.Dir)
	if err := os.MkdirAll(idDir, 0o700); err != nil {
		return err
	}
	aside := ""
	if _, err := os.Lstat(in.Dir); err == nil {
		aside = staging + ".replaced"
		if err := os.Rename(in.Dir, aside); err != nil {
			return fmt.Errorf("move the earlier install aside: %w", err)
		}
	}
	undo := func() {
		if aside != "" {
			os.Rename(aside, in.Dir)
		}
		os.Remove(idDir) // only if empty: a first install leaves no directory
	}
	if err := os.Rename(staging, in.Dir); err != nil {
		undo()
		return fmt.Errorf("move the install into place: %w", err)
	}
	lf.Agents[in.ID] = in
	if err := writeLockfile(dir, lf); err != nil {
		os.RemoveAll(in.Dir)
		undo()
		return err
	}
	if aside != "" {
		os.RemoveAll(aside) // a leftover goes with the next install's removeStaging
	}
	return nil
}

// removeOthers removes the files of the agent's versions other than
// version: the one just replaced, and any an interrupted removal left.
func removeOthers(dir, id, version string) error {
	ents, err := os.ReadDir(filepath.Join(dir, id))
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.Name() != version {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, id, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// removeStaging removes what installs that never finished left in dir.
// Only with the agents lock held, and only where it is a real lock
// (filelock.Supported): elsewhere the staging might be another install's.
func removeStaging(dir string) {
	if !filelock.Supported {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stagingPrefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// localPath is a command or entry path of an archive as a path inside
// the install's directory; it refuses an absolute path, a '..' element
// and a backslash, and returns "" for the directory itself.
func localPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path")
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return "", fmt.Errorf("%q is an absolute path", p)
	case strings.Contains(p, `\`):
		return "", fmt.Errorf("%q has a backslash", p)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return "", fmt.Errorf("%q has a '..' element", p)
	}
	clean := filepath.Clean(filepath.FromSlash(p))
	if clean == "." {
		return "", nil
	}
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%q is not a path inside the install", p)
	}
	return clean, nil
}
