package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// An npx agent is installed with the user's npm, once, pinned, and run
// from its install directory: never through npx, which would resolve
// and download at every start. The install is
//
//	npm install --prefix DIR --no-save --no-audit --no-fund --no-update-notifier --loglevel=error NAME@VERSION
//
// with the user's npm configuration (registry, proxy, auth) and
// environment. Install scripts run, as they do under npx, which is what
// the registry's entries are published and tested with: agents depend on
// packages that build or fetch native parts at install (node-pty and the
// like), and --ignore-scripts would leave those broken. It buys little
// safety besides: the scripts are the same publishers' code that Baton
// runs, with the same rights, as soon as the agent starts. What guards
// the supply chain is the pin: the exact version, and the integrity npm
// recorded, kept in the lockfile.

// npmNamePattern is an npm package name, scoped or not; it cannot start
// with '-', so it is never read as an option.
var npmNamePattern = regexp.MustCompile(`^(@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*$`)

// npmWaitDelay is how long, after npm exits or ctx ends, the install
// waits for npm's children to let go of its output.
const npmWaitDelay = 5 * time.Second

// maxNPMOutput is how much of npm's output an error quotes (its end).
const maxNPMOutput = 4 << 10

// npmSpec is the package an install asks npm for.
type npmSpec struct {
	name, version string
}

func (s npmSpec) String() string { return s.name + "@" + s.version }

// npmSpecOf is the package to install: the registry's package at the
// version asked for; else at the version its package string names
// ("@google/gemini-cli@0.27.3"); else at the agent's version.
func npmSpecOf(p Package, agentVersion, asked string) (npmSpec, error) {
	name, pinned := p.Package, ""
	if i := strings.LastIndexByte(p.Package, '@'); i > 0 {
		name, pinned = p.Package[:i], p.Package[i+1:]
	}
	if !npmNamePattern.MatchString(name) {
		return npmSpec{}, fmt.Errorf("the registry's npm package %q is not a package name", p.Package)
	}
	if pinned != "" {
		if err := CheckVersion(pinned); err != nil {
			return npmSpec{}, fmt.Errorf("the registry's npm package %q is not pinned to an exact version: %w", p.Package, err)
		}
	}
	switch {
	case asked != "":
		return npmSpec{name, asked}, nil
	case pinned != "":
		return npmSpec{name, pinned}, nil
	}
	return npmSpec{name, agentVersion}, nil
}

// installNPM installs spec into staging and finds its command.
func installNPM(ctx context.Context, staging string, spec npmSpec, p Package) (staged, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return staged{}, fmt.Errorf("%s is an npm package, and npm is not on PATH (install Node.js, which has it): %w", spec, err)
	}
	var out tailBuffer
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", staging,
		"--no-save", "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error", spec.String())
	cmd.Dir = staging
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = npmWaitDelay
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return staged{}, fmt.Errorf("npm install %s: %w", spec, context.Cause(ctx))
		}
		return staged{}, fmt.Errorf("npm install %s: %w\n%s", spec, err, bytes.TrimSpace(out.Bytes()))
	}

	pkgDir := filepath.Join(staging, "node_modules", filepath.FromSlash(spec.name))
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return staged{}, fmt.Errorf("npm installed %s, but: %w", spec, err)
	}
	var pj struct {
		Version string          `json:"version"`
		Bin     json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		return staged{}, fmt.Errorf("npm installed %s, but its package.json: %w", spec, err)
	}
	if pj.Version != spec.version {
		return staged{}, fmt.Errorf("npm installed %s, but its package.json says version %q", spec, pj.Version)
	}
	bin, err := pickBin(spec.name, pj.Bin)
	if err != nil {
		return staged{}, fmt.Errorf("package %s: %w", spec, err)
	}
	rel := filepath.Join("node_modules", ".bin", bin)
	if _, err := os.Stat(filepath.Join(staging, rel)); err != nil {
		return staged{}, fmt.Errorf("npm installed %s, but not its command: %w", spec, err)
	}
	integrity, err := npmIntegrity(staging, spec.name)
	if err != nil {
		return staged{}, fmt.Errorf("npm installed %s, but: %w", spec, err)
	}
	return staged{cmd: rel, args: p.Args, env: p.Env, source: spec.String(), integrity: integrity}, nil
}

// pickBin is the command of a package.json "bin": a string is a command
// named like the package (without its scope); of a map's commands, the
// one named like the package, else the only one.
func pickBin(name string, raw json.RawMessage) (string, error) {
	base := path.Base(name)
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New(`its package.json has no "bin": it installs no command`)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return checkBinName(base)
	}
	var bins map[string]string
	if err := json.Unmarshal(raw, &bins); err != nil {
		return "", fmt.Errorf(`its package.json "bin" is neither a path nor a map of commands: %w`, err)
	}
	if _, ok := bins[base]; ok {
		return checkBinName(base)
	}
	names := slices.Sorted(maps.Keys(bins))
	switch len(names) {
	case 0:
		return "", errors.New(`its package.json "bin" is empty: it installs no command`)
	case 1:
		return checkBinName(names[0])
	}
	return "", fmt.Errorf("it installs the commands %s, none named %s: which one is the agent is not known", strings.Join(names, ", "), base)
}

// checkBinName refuses a command name that is not a plain file name.
func checkBinName(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("command name %q is not a file name", name)
	}
	return name, nil
}

// npmIntegrity is the integrity npm recorded for the package in its
// hidden lockfile, node_modules/.package-lock.json; "" when it recorded
// none (a package from a directory or a git repository has none).
func npmIntegrity(prefix, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", ".package-lock.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var lock struct {
		Packages map[string]struct {
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return "", fmt.Errorf("read npm's lockfile: %w", err)
	}
	return lock.Packages["node_modules/"+name].Integrity, nil
}

// tailBuffer keeps the last maxNPMOutput bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > maxNPMOutput {
		t.b = append(t.b[:0], t.b[len(t.b)-maxNPMOutput:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.b }
