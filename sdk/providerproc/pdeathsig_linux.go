package providerproc

import "syscall"

// setParentDeath asks Linux to kill the provider if the plugin dies without
// closing it (a SIGKILLed plugin cannot run Close).
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
