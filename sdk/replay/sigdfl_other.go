//go:build unix && !linux

package replay

import "syscall"

// setDefault does nothing here: these systems have no rt_sigaction(2),
// and os/signal cannot give a signal its default action. A SIGHUP or
// SIGINT the process inherited ignored stays ignored, and die returns its
// exit code after its minute.
func setDefault(syscall.Signal) error { return nil }
