package pluginhost

import (
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/pluginclient"
)

// namePattern is what a plugin's name may be: it becomes a file name and a
// provider name on the command line.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// CheckName refuses a plugin name that is not lower-case letters, digits
// and '-' (starting with a letter or digit).
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("plugin name %q is not allowed: use lower-case letters, digits and '-', starting with a letter or digit (for example --name myagent)", name)
	}
	return nil
}

// checkMode refuses a plugin directory or binary that others than its
// owner may write: whoever can write it can run code as the host.
func checkMode(path, what, fix string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%s %s is writable by group or others (mode %04o), so anyone who can write it could run code as baton: make it private with 'chmod go-w %s'",
			what, path, m, fix)
	}
	return nil
}

// checkInstalled refuses a plugin, before it is started, whose name or
// permissions are not safe.
func checkInstalled(dir, name, bin string) error {
	if err := CheckName(name); err != nil {
		return fmt.Errorf("plugin %s at %s: %w; rename the file baton-plugin-NAME", name, bin, err)
	}
	if err := checkMode(dir, "plugin directory", dir); err != nil {
		return fmt.Errorf("plugin %s: %w", name, err)
	}
	if err := checkMode(bin, "plugin", bin); err != nil {
		return fmt.Errorf("plugin %s: %w", name, err)
	}
	return nil
}

// launchError says why a binary could not be started as a plugin and what
// to do: a checksum or protocol version refusal says so itself; any other
// failure of the handshake means the binary is not a Baton plugin.
func launchError(what string, err error) error {
	var ve *pluginclient.VersionError
	if errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", what, ve)
	}
	if strings.Contains(err.Error(), "SHA-256 does not match") { // pluginclient's checksum refusal

		return fmt.Errorf("%s: %w", what, err)
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // go-plugin's own, without Launch's "start plugin PATH"
	}
	return fmt.Errorf("%s is not a Baton plugin (the plugin handshake failed: %w); install a binary whose main calls server.Serve from github.com/baton-run/baton/sdk/server", what, err)
}

// CapabilityNames are the capabilities a plugin declares, by the names
// `baton plugin list` shows (the sdk.Note* keys).
func CapabilityNames(c sdk.Capabilities) []string {
	var names []string
	for _, n := range []struct {
		on   bool
		name string
	}{{c.NativeSteering, sdk.NoteSteering}, {c.Interrupt, sdk.NoteInterrupt}, {c.Approvals, sdk.NoteApprovals},
		{c.Subagents, sdk.NoteSubagents}, {c.NativeRollback, sdk.NoteRollback}, {c.Resume, sdk.NoteResume},
		{c.ThreadSnapshot, sdk.NoteSnapshot}} {
		if n.on {
			names = append(names, n.name)
		}
	}
	return names
}

// probe starts a binary with its checksum and asks it to describe itself,
// within DefaultCallTimeout.
func probe(ctx context.Context, bin, sum, what string) (sdk.Description, error) {
	raw, err := hexSum(sum)
	if err != nil {
		return sdk.Description{}, err
	}
	p, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: bin, Checksum: raw})
	if err != nil {
		return sdk.Description{}, launchError(what, err)
	}
	defer p.Kill()
	ctx, cancel := context.WithTimeoutCause(ctx, DefaultCallTimeout, errDescribeTimeout)
	defer cancel()
	d, err := p.Describe(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errDescribeTimeout) {
		return sdk.Description{}, fmt.Errorf("%s: it did not answer Describe within %s, so it was stopped (a working plugin answers at once)", what, DefaultCallTimeout)
	}
	if err != nil {
		return sdk.Description{}, fmt.Errorf("%s: describe: %w", what, err)
	}
	return d, nil
}

// InstallFile installs a plugin binary in dir as name: it is copied in,
// started to check that it is a Baton plugin of this host's protocol
// version (and to record what it says of itself), then locked.
func InstallFile(ctx context.Context, src, dir, name string) (LockEntry, error) {
	if err := CheckName(name); err != nil {
		return LockEntry{}, fmt.Errorf("install plugin: %w", err)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return LockEntry{}, fmt.Errorf("install plugin %s: %w", name, err)
	}
	return install(ctx, abs, dir, name, "file:"+abs, src)
}

func install(ctx context.Context, src, dir, name, source, what string) (LockEntry, error) {
	tmp, sum, err := copyIn(src, dir, name)
	if err != nil {
		return LockEntry{}, err
	}
	d, err := probe(ctx, tmp, sum, what)
	if err != nil {
		os.Remove(tmp)
		return LockEntry{}, fmt.Errorf("install plugin %s: %w", name, err)
	}
	e := LockEntry{SHA256: sum, Source: source, Protocol: sdk.ProtocolVersion, Version: d.Version, SDKVersion: d.SDKVersion,
		Capabilities: CapabilityNames(d.Capabilities)}
	if err := commit(dir, name, tmp, e); err != nil {
		return LockEntry{}, err
	}
	e.File = BinaryPrefix + name
	return e, nil
}

// GoInstall says how InstallModule runs the go command.
type GoInstall struct {
	// Go is the go command (default "go" on $PATH).
	Go string
	// Env is its environment (default os.Environ()): GOPROXY, GOSUMDB,
	// GOFLAGS and the rest are the user's own.
	Env []string
	// Output receives what go prints (default: nowhere; it is in the
	// error when go fails).
	Output io.Writer
}

// InstallModule builds PACKAGE@VERSION with go install into a temporary
// GOBIN (through the user's module proxy and checksum database) and
// installs the binary in dir as InstallFile does, with the source
// PACKAGE@VERSION at the version go resolved. The name is name, or else
// the binary's: X for baton-plugin-X, or the package's last path element.
func InstallModule(ctx context.Context, pkgVersion, dir, name string, g GoInstall) (LockEntry, string, error) {
	pkg, _, ok := strings.Cut(pkgVersion, "@")
	if !ok || pkg == "" {
		return LockEntry{}, "", fmt.Errorf("install plugin: %q is not PACKAGE@VERSION (for example github.com/you/baton-plugin-x@latest)", pkgVersion)
	}
	if name != "" {
		if err := CheckName(name); err != nil {
			return LockEntry{}, "", fmt.Errorf("install plugin: %w", err)
		}
	}
	gobin, err := os.MkdirTemp("", "baton-plugin-gobin-")
	if err != nil {
		return LockEntry{}, "", fmt.Errorf("install plugin %s: %w", pkgVersion, err)
	}
	defer os.RemoveAll(gobin)
	bin, err := goInstall(ctx, pkgVersion, gobin, g)
	if err != nil {
		return LockEntry{}, "", err
	}
	if name == "" {
		base := strings.TrimSuffix(filepath.Base(bin), ".exe")
		name = strings.TrimPrefix(base, BinaryPrefix)
		if err := CheckName(name); err != nil {
			return LockEntry{}, "", fmt.Errorf("install plugin %s: the binary is %s: %w", pkgVersion, base, err)
		}
	}
	source := pkgVersion
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Path != "" && bi.Main.Version != "" {
		source = bi.Path + "@" + bi.Main.Version // @latest resolved
	}
	e, err := install(ctx, bin, dir, name, source, pkgVersion)
	return e, name, err
}

// goInstall runs go install into gobin and returns the one binary built.
func goInstall(ctx context.Context, pkgVersion, gobin string, g GoInstall) (string, error) {
	goCmd := g.Go
	if goCmd == "" {
		goCmd = "go"
	}
	env := g.Env
	if env == nil {
		env = os.Environ()
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, goCmd, "install", pkgVersion)
	cmd.Env = append(append([]string(nil), env...), "GOBIN="+gobin)
	w := io.Writer(&out)
	if g.Output != nil {
		w = io.MultiWriter(&out, g.Output)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		said := ""
		if g.Output == nil {
			said = ":\n" + strings.TrimSpace(out.String())
		}
		return "", fmt.Errorf("install plugin %s: go install failed (%v); check the module path and version, and that the go command can reach your module proxy (GOPROXY)%s",
			pkgVersion, err, said)
	}
	var bins []string
	err := filepath.WalkDir(gobin, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			bins = append(bins, p)
		}
		return err
	})
	if err != nil || len(bins) != 1 {
		return "", fmt.Errorf("install plugin %s: go install built %d binaries (%v), want one: is it a main package (and GOOS/GOARCH this machine's)?", pkgVersion, len(bins), err)
	}
	return bins[0], nil
}

// Upgrade rebuilds a plugin installed from a module at version (latest
// when empty) and replaces it: the old binary and its record stay unless
// the new one builds and passes every check InstallModule makes.
func Upgrade(ctx context.Context, dir, name, version string, g GoInstall) (old, updated LockEntry, err error) {
	if err := CheckName(name); err != nil {
		return LockEntry{}, LockEntry{}, fmt.Errorf("upgrade plugin: %w", err)
	}
	lf, err := ReadLockfile(dir)
	if err != nil {
		return LockEntry{}, LockEntry{}, err
	}
	old, ok := lf.Plugins[name]
	if !ok {
		return LockEntry{}, LockEntry{}, fmt.Errorf("upgrade plugin %s: it is not installed in %s (see 'baton plugin list')", name, dir)
	}
	pkg, _, isModule := strings.Cut(old.Source, "@")
	if !isModule || strings.HasPrefix(old.Source, "file:") {
		return old, LockEntry{}, fmt.Errorf("upgrade plugin %s: it was installed from a file (%s), not a module; install the new binary with 'baton plugin install %s FILE'",
			name, cmp.Or(old.Source, "no source recorded"), name)
	}
	if version == "" {
		version = "latest"
	}
	updated, _, err = InstallModule(ctx, pkg+"@"+version, dir, name, g)
	if err != nil {
		return old, LockEntry{}, fmt.Errorf("upgrade plugin %s (kept %s): %w", name, old.Source, err)
	}
	return old, updated, nil
}

// Remove deletes a plugin's binary from dir and its record from the
// lockfile.
func Remove(dir, name string) error {
	if err := CheckName(name); err != nil {
		return fmt.Errorf("remove plugin: %w", err)
	}
	lf, err := ReadLockfile(dir)
	if err != nil {
		return err
	}
	_, locked := lf.Plugins[name]
	err = os.Remove(filepath.Join(dir, BinaryPrefix+name))
	if errors.Is(err, fs.ErrNotExist) && !locked {
		return fmt.Errorf("remove plugin %s: it is not installed in %s (see 'baton plugin list')", name, dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove plugin %s: %w", name, err)
	}
	if !locked {
		return nil
	}
	delete(lf.Plugins, name)
	return writeLockfile(dir, lf)
}

// Problems Verify finds.
const (
	ProblemMissing    = "missing"    // locked, but the binary is gone
	ProblemTampered   = "tampered"   // the binary's SHA-256 is not the recorded one
	ProblemNotLocked  = "not locked" // a binary with no record
	ProblemPermission = "permission" // writable by group or others, or a bad name
)

// Check is what Verify found of one plugin (Problem empty: it is as
// locked).
type Check struct {
	Name    string
	Path    string
	Problem string
	Detail  string // what is wrong and what to do
}

// Verify checks every plugin binary in dir against the lockfile, without
// starting any: each locked binary is there with its checksum, each binary
// is locked, and neither the directory nor a binary is writable by group
// or others. Checks come sorted by name; a problem of the directory itself
// is named by the directory.
func Verify(dir string) ([]Check, error) {
	lf, err := ReadLockfile(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("verify plugins: %w", err)
	}
	var checks []Check
	if err := checkMode(dir, "plugin directory", dir); err != nil {
		checks = append(checks, Check{Name: dir, Path: dir, Problem: ProblemPermission, Detail: err.Error()})
	}
	seen := map[string]bool{}
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
		if !ok || e.IsDir() {
			continue
		}
		seen[name] = true
		p := filepath.Join(dir, e.Name())
		c := Check{Name: name, Path: p}
		entry, locked := lf.Plugins[name]
		switch sum, err := FileSHA256(p); {
		case err != nil:
			c.Problem, c.Detail = ProblemMissing, err.Error()
		case CheckName(name) != nil:
			c.Problem, c.Detail = ProblemPermission, CheckName(name).Error()+"; rename or remove "+p
		case !locked || entry.File != e.Name():
			c.Problem, c.Detail = ProblemNotLocked, fmt.Sprintf("%s has no checksum in %s; if you trust it, record it with 'baton plugin lock %s', else remove it",
				p, filepath.Join(dir, LockfileName), dir)
		case sum != entry.SHA256:
			c.Problem, c.Detail = ProblemTampered, fmt.Sprintf("%s has SHA-256 %s, the lock records %s; reinstall it (baton plugin install or upgrade) or remove it",
				p, sum, entry.SHA256)
		default:
			if err := checkMode(p, "plugin", p); err != nil {
				c.Problem, c.Detail = ProblemPermission, err.Error()
			}
		}
		checks = append(checks, c)
	}
	for name, entry := range lf.Plugins {
		if !seen[name] {
			p := filepath.Join(dir, path.Base(entry.File))
			checks = append(checks, Check{Name: name, Path: p, Problem: ProblemMissing,
				Detail: fmt.Sprintf("%s is locked but not there; reinstall it, or 'baton plugin remove %s' to forget it", p, name)})
		}
	}
	sort.SliceStable(checks, func(i, j int) bool {
		return checks[i].Path == dir || (checks[j].Path != dir && checks[i].Name < checks[j].Name)
	})
	return checks, nil
}

// hexSum decodes a recorded SHA-256.
func hexSum(sum string) ([]byte, error) {
	b, err := hex.DecodeString(sum)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("bad sha256 %q", sum)
	}
	return b, nil
}
