package pluginclient

import (
	"os/exec"
	"syscall"
)

// dieWithHost asks Linux to send the plugin SIGTERM when the host dies, so
// a host killed with SIGKILL leaves no plugin (and, through Serve's SIGTERM
// handling, no provider) behind.
func dieWithHost(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
