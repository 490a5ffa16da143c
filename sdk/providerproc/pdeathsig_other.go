//go:build !linux

package providerproc

import "syscall"

// setParentDeath has no equivalent here; Close still ends the group.
func setParentDeath(*syscall.SysProcAttr) {}
