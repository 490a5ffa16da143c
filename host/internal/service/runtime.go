package service

import (
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// runtimeStats is what the service's process holds now. Reading it stops
// nothing: the heap comes from runtime/metrics, the rest from /proc where
// there is one.
func runtimeStats() *batonv1.RuntimeStats {
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(heap)
	st := &batonv1.RuntimeStats{Goroutines: int32(runtime.NumGoroutine()), OpenFiles: -1}
	if heap[0].Value.Kind() == metrics.KindUint64 {
		st.HeapBytes = heap[0].Value.Uint64()
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		st.OpenFiles = int32(len(fds) - 1) // less the one reading it
	}
	st.ResidentBytes = residentBytes()
	return st
}

// residentBytes is the process's resident set (VmRSS in /proc/self/status),
// 0 where there is none.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(rest) // "1234 kB"
			if len(f) == 2 && string(f[1]) == "kB" {
				if kb, err := strconv.ParseUint(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
