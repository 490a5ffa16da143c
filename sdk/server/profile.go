package server

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// ProfileEnv, set in a plugin's environment to a path prefix, makes the
// plugin write a CPU profile of its whole life to PREFIX.PID (read it with
// go tool pprof): how the time of a pipeline splits between the host and
// its plugins is measured with it.
const ProfileEnv = "BATON_PLUGIN_CPUPROFILE"

// startProfile starts the CPU profile ProfileEnv asks for and returns what
// stops it (once; a no-op when none was asked for or it could not start).
func startProfile(log hclog.Logger) (stop func()) {
	prefix := os.Getenv(ProfileEnv)
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s.%d", prefix, os.Getpid())
	f, err := os.Create(name)
	if err != nil {
		log.Warn("no CPU profile", "error", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		log.Warn("no CPU profile", "file", name, "error", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
}
