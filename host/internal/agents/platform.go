package agents

import "runtime"

// Platform is this machine's platform key in the registry's words:
// "linux-x86_64", "darwin-aarch64", "windows-x86_64", ... An operating
// system or architecture the format does not name keeps Go's name
// ("freebsd-riscv64"), which no registry entry has an archive for.
func Platform() string {
	return platformKey(runtime.GOOS, runtime.GOARCH)
}

func platformKey(goos, goarch string) string {
	arch := goarch
	switch goarch {
	case "amd64":
		arch = "x86_64"
	case "arm64":
		arch = "aarch64"
	}
	return goos + "-" + arch
}
