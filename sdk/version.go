package sdk

// ProtocolVersion is the version of the plugin wire contract this sdk
// speaks, negotiated with the host at the handshake. It changes only when
// an old host could no longer talk to a new plugin (or the other way
// round); adding fields does not change it. A host refuses a plugin of
// another version, naming both (see CHANGELOG.md for what changed).
const ProtocolVersion = 1

// Version is this sdk's release (the module's v1 line); a plugin reports it
// in its description, and `baton plugin list` shows it.
const Version = "1.3.0"
