// Package agents gives Baton the agents of the ACP Registry
// (https://github.com/agentclientprotocol/registry): a catalog of them,
// and installs of them pinned to a version, so that an agent runs from
// files on this machine and never from whatever a package manager
// resolves at start.
//
// # The catalog
//
// Load fetches the registry (DefaultRegistryURL, another URL, or a file)
// and returns a Catalog. Each fetch is kept in DATA/agents/registry.json
// exactly as it came, with registry.meta.json saying where from and when.
// When the registry's URL cannot be reached or answers with an error
// status, Load returns the cached copy instead, with Catalog.FromCache
// set, FetchedAt and Age saying how old it is and FetchErr why, so that
// a command can print "offline: using the registry fetched 3h ago".
// Parse reads the registry's format; what it refuses is a *ParseError
// naming the line and column at fault. Members it does not know are
// ignored. One extension of the format is read: a binary target's
// "sha256", the archive's SHA-256, which a download must then match.
//
// # Installs
//
// Install puts an agent in DATA/agents/ID/VERSION and records it in
// DATA/agents/agents.lock (LockfileName): version, kind, source, hashes,
// the command's argv and environment, and when. Of an agent's
// distributions, it takes the archive for this Platform when the registry
// has one, else the npm package:
//
//   - binary: the archive is downloaded, its SHA-256 checked against the
//     registry's when given and recorded always, and extracted (.tar.gz,
//     .tgz, .tar, .zip, or the executable itself) so that no entry
//     reaches outside the install's directory; the command is
//     DIR/<cmd>. Only the registry's version can be installed: it lists
//     no other version's archive.
//   - npx: the package is installed with the user's npm at an exact
//     version, into DIR/node_modules (install scripts run, as under npx:
//     see npm.go), and the command is the package's bin of its name.
//     Any version npm has can be asked for.
//   - uvx: not supported yet (uv is not a dependency of Baton): Install
//     fails with an error wrapping errors.ErrUnsupported.
//
// An install is made in a staging directory in DATA/agents and moved
// into place only when it is complete: one that fails leaves nothing.
// Installing replaces the agent's earlier install, whose files then go;
// Upgrade does that for the registry's current version, and Remove
// removes an agent. These three take a file lock on DATA/agents (on
// Unix), so that two baton processes do not install at once.
//
// Lookup returns what `baton run --agent ID` needs: the command and its
// environment (Installation.Environ), or an error naming the command
// that installs the agent.
//
// A typical CLI:
//
//	cat, err := agents.Load(ctx, agents.Options{DataDir: data})
//	if cat.FromCache { /* offline: say cat.Age(), cat.FetchErr */ }
//	in, err := agents.Install(ctx, cat, "gemini", "")
//	...
//	in, err = agents.Lookup(data, "gemini")
//	cmd := exec.CommandContext(ctx, in.Command[0], in.Command[1:]...)
//	cmd.Env = in.Environ(os.Environ())
package agents
