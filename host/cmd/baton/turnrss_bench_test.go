package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-run/baton/host/internal/testbin"
)

// BenchmarkLongTurnRSS runs `baton run` as a user does, one ACP turn of
// 10,000 and of 100,000 content deltas at full speed from the replay
// peer, and reports the baton process's peak resident memory
// (maxRSS-MB): it must be bounded by the work in flight, not by the
// turn's length (the goal: the 100,000-delta turn within 1.2x of the
// 10,000-delta one).
func BenchmarkLongTurnRSS(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			long, err := testbin.WriteLongTurn(root, b.TempDir(), testbin.ACPTurn, n, 0)
			if err != nil {
				b.Fatal(err)
			}
			peer := fmt.Sprintf("'%s' --transcript '%s' --speed 0", filepath.Join(binDir, "replaypeer"), long)
			var peak int64
			for b.Loop() {
				cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", b.TempDir(), "--cwd", b.TempDir(), "--provider", "acp",
					"--provider-command", peer, "Say hello.")
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil {
					b.Fatalf("baton run: %v\n%s", err, out.String())
				}
				if !strings.Contains(out.String(), fmt.Sprintf("c%d ", n)) {
					b.Fatalf("the answer lacks its last delta c%d:\n%.2000s", n, out.String())
				}
				peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
			}
			b.ReportMetric(float64(peak)/1024, "maxRSS-MB")
		})
	}
}
