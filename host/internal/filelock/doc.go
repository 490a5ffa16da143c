// Package filelock takes an advisory lock on an open file without
// blocking (flock where the platform has it), for a data dir's installs
// and captures that two baton processes must not run at once.
package filelock
