package agents

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// FormatMajor is the major version of the registry format Parse reads
// ("1.0.0" today). A registry of another major version changed in ways
// this code cannot know, so it is refused rather than half-read; minor
// versions only add, and what they add is ignored.
const FormatMajor = "1"

// Registry is the ACP Registry's index: the agents, and the extensions
// (entries of the same form, for clients; listed, never installed).
type Registry struct {
	// Version is the registry format's version ("1.0.0").
	Version    string  `json:"version"`
	Agents     []Agent `json:"agents"`
	Extensions []Agent `json:"extensions,omitempty"`
}

// Agent is one entry of the registry.
type Agent struct {
	// ID names the agent everywhere (baton agents install ID); it matches
	// ^[a-z][a-z0-9-]*$ and is unique in the registry.
	ID string `json:"id"`
	// Name is its display name.
	Name string `json:"name,omitempty"`
	// Version is the version the registry distributes (MAJOR.MINOR.PATCH,
	// maybe with a pre-release or build suffix).
	Version      string       `json:"version"`
	Description  string       `json:"description,omitempty"`
	Repository   string       `json:"repository,omitempty"`
	Authors      []string     `json:"authors,omitempty"`
	License      string       `json:"license,omitempty"`
	Icon         string       `json:"icon,omitempty"`
	Distribution Distribution `json:"distribution"`
}

// Kind is a way an agent is distributed.
type Kind string

const (
	// KindBinary is an archive per platform, downloaded and extracted.
	KindBinary Kind = "binary"
	// KindNPX is an npm package.
	KindNPX Kind = "npx"
	// KindUVX is a PyPI package, run with uv. Not installable yet.
	KindUVX Kind = "uvx"
)

// Distribution is how an agent is distributed: any of the three kinds.
type Distribution struct {
	// Binary holds an archive per platform key (see Platform).
	Binary map[string]BinaryTarget `json:"binary,omitempty"`
	NPX    *Package                `json:"npx,omitempty"`
	UVX    *Package                `json:"uvx,omitempty"`
}

// BinaryTarget is the archive of one platform.
type BinaryTarget struct {
	// Archive is the archive's URL: .tar.gz, .tgz, .tar or .zip, or
	// the executable itself.
	Archive string `json:"archive"`
	// Cmd is the command's path in the extracted archive ("./codex-acp").
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// SHA256 is the archive's SHA-256 in lower-case hex: Baton's
	// extension of the format; when present, a download must match it.
	SHA256 string `json:"sha256,omitempty"`
}

// Package is an npm (npx) or PyPI (uvx) package.
type Package struct {
	// Package is the package's name, perhaps with its version
	// ("@google/gemini-cli@0.27.3").
	Package string            `json:"package"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Choose returns the kind Install uses on a platform: a binary when the
// registry has an archive for the platform (nothing to build, nothing but
// the archive to trust), else npx, else uvx; false when there is none.
func (d Distribution) Choose(platform string) (Kind, bool) {
	switch _, ok := d.Binary[platform]; {
	case ok:
		return KindBinary, true
	case d.NPX != nil:
		return KindNPX, true
	case d.UVX != nil:
		return KindUVX, true
	}
	return "", false
}

// Agent returns the agent of that id.
func (r *Registry) Agent(id string) (Agent, bool) {
	i := slices.IndexFunc(r.Agents, func(a Agent) bool { return a.ID == id })
	if i < 0 {
		return Agent{}, false
	}
	return r.Agents[i], true
}

// platforms are the platform keys the format defines.
var platforms = []string{
	"darwin-aarch64", "darwin-x86_64",
	"linux-aarch64", "linux-x86_64",
	"windows-aarch64", "windows-x86_64",
}

var (
	idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	// versionPattern is the schema's ^[0-9]+\.[0-9]+\.[0-9]+ held to the
	// end (a version names a directory), with semver's suffixes allowed.
	versionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$`)
	sha256Pattern  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// CheckID refuses what is not an agent id.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%q is not an agent id (lower-case letters, digits and '-', starting with a letter)", id)
	}
	return nil
}

// CheckVersion refuses what is not a version (MAJOR.MINOR.PATCH, with an
// optional -pre-release or +build suffix).
func CheckVersion(v string) error {
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("%q is not a version (MAJOR.MINOR.PATCH, like 1.2.3 or 1.2.3-beta.1)", v)
	}
	return nil
}

// ParseError is what Parse refuses: where, by line and column (both from
// 1; the column counts characters), and what is wrong.
type ParseError struct {
	Line, Column int
	// Path is the JSON path of the value at fault (agents[2].version);
	// empty for a syntax error.
	Path string
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s: %s", e.Line, e.Column, e.Path, e.Msg)
}

// Parse reads a registry. It refuses, with a *ParseError, bad JSON, a
// member of the wrong type, a registry of another major format version,
// an entry without an id, a version or a distribution, an id that is not
// one (CheckID) or that another entry has, a version that is not one
// (CheckVersion), an unknown platform key, a binary target without an
// archive or a command, a package without a name and a sha256 that is
// not 64 hex digits. Members it does not know are ignored: a newer
// registry may add some. Empty lists and maps read as nil.
func Parse(data []byte) (*Registry, error) {
	root, err := readTree(data)
	if err != nil {
		se := err.(*syntaxError) // readTree fails with nothing else
		return nil, newParseError(data, se.off, "", "invalid JSON: "+se.msg)
	}
	p := parser{data: data, ids: map[string]int{}}
	return p.registry(root)
}

func newParseError(data []byte, off int, path, msg string) *ParseError {
	off = min(off, len(data))
	before := data[:off]
	line := 1 + strings.Count(string(before), "\n")
	lineStart := strings.LastIndexByte(string(before), '\n') + 1
	return &ParseError{Line: line, Column: 1 + utf8.RuneCount(before[lineStart:]), Path: path, Msg: msg}
}

// parser turns the tree into a Registry, checking it.
type parser struct {
	data []byte
	ids  map[string]int // the offset of each id seen
}

func (p *parser) fail(off int, path, format string, args ...any) error {
	return newParseError(p.data, off, path, fmt.Sprintf(format, args...))
}

// want refuses a value of another kind.
func (p *parser) want(n *node, path string, kind nodeKind) error {
	if n.kind != kind {
		return p.fail(n.off, path, "%s, want %s", n.kind, kind)
	}
	return nil
}

func (p *parser) registry(root *node) (*Registry, error) {
	if err := p.want(root, "", kindObject); err != nil {
		return nil, err
	}
	r := &Registry{Agents: []Agent{}}
	v := root.member("version")
	if v == nil {
		return nil, p.fail(root.off, "", `no "version"`)
	}
	if err := p.want(v.val, "version", kindString); err != nil {
		return nil, err
	}
	if major, _, _ := strings.Cut(v.val.str, "."); major != FormatMajor {
		return nil, p.fail(v.val.off, "version", "format %q, want %s.x", v.val.str, FormatMajor)
	}
	r.Version = v.val.str
	agents := root.member("agents")
	if agents == nil {
		return nil, p.fail(root.off, "", `no "agents"`)
	}
	var err error
	if r.Agents, err = p.entries(agents.val, "agents"); err != nil {
		return nil, err
	}
	if r.Agents == nil {
		r.Agents = []Agent{}
	}
	if ext := root.member("extensions"); ext != nil {
		if r.Extensions, err = p.entries(ext.val, "extensions"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (p *parser) entries(n *node, path string) ([]Agent, error) {
	if err := p.want(n, path, kindArray); err != nil {
		return nil, err
	}
	var out []Agent
	for i, e := range n.elems {
		a, err := p.agent(e, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (p *parser) agent(n *node, path string) (Agent, error) {
	var a Agent
	if err := p.want(n, path, kindObject); err != nil {
		return a, err
	}
	for _, name := range []string{"id", "version", "distribution"} {
		if n.member(name) == nil {
			return a, p.fail(n.off, path, "no %q", name)
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"id", &a.ID}, {"name", &a.Name}, {"version", &a.Version}, {"description", &a.Description},
		{"repository", &a.Repository}, {"license", &a.License}, {"icon", &a.Icon},
	} {
		if err := p.str(n, path, f.name, f.dst); err != nil {
			return a, err
		}
	}
	id := n.member("id").val
	if err := CheckID(a.ID); err != nil {
		return a, p.fail(id.off, path+".id", "%v", err)
	}
	if first, ok := p.ids[a.ID]; ok {
		f := newParseError(p.data, first, "", "")
		return a, p.fail(id.off, path+".id", "duplicate id %q (first at line %d, column %d)", a.ID, f.Line, f.Column)
	}
	p.ids[a.ID] = id.off
	if err := CheckVersion(a.Version); err != nil {
		return a, p.fail(n.member("version").val.off, path+".version", "%v", err)
	}
	var err error
	if a.Authors, err = p.strings(n.member("authors"), path+".authors"); err != nil {
		return a, err
	}
	a.Distribution, err = p.distribution(n.member("distribution").val, path+".distribution")
	return a, err
}

func (p *parser) distribution(n *node, path string) (Distribution, error) {
	var d Distribution
	if err := p.want(n, path, kindObject); err != nil {
		return d, err
	}
	if m := n.member("binary"); m != nil {
		bpath := path + ".binary"
		if err := p.want(m.val, bpath, kindObject); err != nil {
			return d, err
		}
		if len(m.val.members) == 0 {
			return d, p.fail(m.val.off, bpath, "no platform")
		}
		d.Binary = map[string]BinaryTarget{}
		for _, t := range m.val.members {
			if !slices.Contains(platforms, t.name) {
				return d, p.fail(t.off, bpath, "unknown platform %q (known: %s)", t.name, strings.Join(platforms, ", "))
			}
			if t.val.kind == kindNull {
				return d, p.fail(t.val.off, bpath+"."+t.name, "null, want an object")
			}
			bt, err := p.binaryTarget(t.val, bpath+"."+t.name)
			if err != nil {
				return d, err
			}
			d.Binary[t.name] = bt
		}
	}
	for _, k := range []struct {
		name string
		dst  **Package
	}{{"npx", &d.NPX}, {"uvx", &d.UVX}} {
		if m := n.member(k.name); m != nil {
			pkg, err := p.pkg(m.val, path+"."+k.name)
			if err != nil {
				return d, err
			}
			*k.dst = &pkg
		}
	}
	return d, nil
}

func (p *parser) binaryTarget(n *node, path string) (BinaryTarget, error) {
	var t BinaryTarget
	if err := p.want(n, path, kindObject); err != nil {
		return t, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"archive", &t.Archive}, {"cmd", &t.Cmd}} {
		if n.member(f.name) == nil {
			return t, p.fail(n.off, path, "no %q", f.name)
		}
		if err := p.str(n, path, f.name, f.dst); err != nil {
			return t, err
		}
		if *f.dst == "" {
			return t, p.fail(n.member(f.name).val.off, path+"."+f.name, "empty")
		}
	}
	if err := p.str(n, path, "sha256", &t.SHA256); err != nil {
		return t, err
	}
	if t.SHA256 != "" && !sha256Pattern.MatchString(t.SHA256) {
		return t, p.fail(n.member("sha256").val.off, path+".sha256", "%q is not a SHA-256 (64 hex digits)", t.SHA256)
	}
	t.SHA256 = strings.ToLower(t.SHA256)
	var err error
	if t.Args, err = p.strings(n.member("args"), path+".args"); err != nil {
		return t, err
	}
	t.Env, err = p.env(n.member("env"), path+".env")
	return t, err
}

func (p *parser) pkg(n *node, path string) (Package, error) {
	var pkg Package
	if err := p.want(n, path, kindObject); err != nil {
		return pkg, err
	}
	m := n.member("package")
	if m == nil {
		return pkg, p.fail(n.off, path, `no "package"`)
	}
	if err := p.str(n, path, "package", &pkg.Package); err != nil {
		return pkg, err
	}
	if pkg.Package == "" {
		return pkg, p.fail(m.val.off, path+".package", "empty")
	}
	var err error
	if pkg.Args, err = p.strings(n.member("args"), path+".args"); err != nil {
		return pkg, err
	}
	pkg.Env, err = p.env(n.member("env"), path+".env")
	return pkg, err
}

// str reads an optional string member into dst.
func (p *parser) str(obj *node, path, name string, dst *string) error {
	m := obj.member(name)
	if m == nil {
		return nil
	}
	if err := p.want(m.val, path+"."+name, kindString); err != nil {
		return err
	}
	*dst = m.val.str
	return nil
}

// strings reads an optional array of strings; empty is nil.
func (p *parser) strings(m *member, path string) ([]string, error) {
	if m == nil {
		return nil, nil
	}
	if err := p.want(m.val, path, kindArray); err != nil {
		return nil, err
	}
	var out []string
	for i, e := range m.val.elems {
		if err := p.want(e, fmt.Sprintf("%s[%d]", path, i), kindString); err != nil {
			return nil, err
		}
		out = append(out, e.str)
	}
	return out, nil
}

// env reads an optional object of string values; empty is nil.
func (p *parser) env(m *member, path string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	if err := p.want(m.val, path, kindObject); err != nil {
		return nil, err
	}
	var out map[string]string
	for _, v := range m.val.members {
		if v.name == "" || strings.ContainsAny(v.name, "=\x00") {
			return nil, p.fail(v.off, path, "%q is not an environment variable name", v.name)
		}
		if err := p.want(v.val, path+"."+v.name, kindString); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[v.name] = v.val.str
	}
	return out, nil
}
