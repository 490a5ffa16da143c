//go:build !unix

package replay

// die cannot end the process by a signal where there are none: it exits
// as a process killed does, with a failure.
func die(string) int { return ExitRuntimeError }
