//go:build !linux

package pluginclient

import "os/exec"

// dieWithHost has no equivalent here; Serve's parent watch covers it.
func dieWithHost(*exec.Cmd) {}
