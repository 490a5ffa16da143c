package jsoncpu

import (
	"bytes"
	"testing"

	"github.com/segmentio/asm/ascii"
	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
)

func TestNoAVX(t *testing.T) {
	for _, f := range []x86.Feature{x86.AVX, x86.AVX2, x86.AVX512F, x86.AVX512BW, x86.AVX512VPOPCNTDQ} {
		if cpu.X86.Has(f) {
			t.Errorf("segmentio still takes feature %#x", f)
		}
	}
	for _, f := range []x86.Feature{x86.SSE2, x86.SSE42, x86.CMOV} {
		if cpu.X86.Has(f) != x86.ABI().Has(f) {
			t.Errorf("feature %#x changed: %v", f, cpu.X86.Has(f))
		}
	}
}

// BenchmarkValidPrint: segmentio's check of a frame before it decodes it,
// its scalar routine (this package's choice) beside its AVX one.
func BenchmarkValidPrint(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"d2f640df-5291-4d4b-82f5-95a2224f1c5d","update":{"content":{"text":"12345","type":"text"},"sessionUpdate":"agent_message_chunk"}}}`)
	long := bytes.Repeat([]byte("a"), 4096)
	for _, c := range []struct {
		name string
		cpu  x86.CPU
	}{{"scalar", cpu.X86}, {"avx", x86.ABI()}} {
		for _, in := range []struct {
			name string
			b    []byte
		}{{"frame", frame}, {"4KiB", long}} {
			b.Run(c.name+"/"+in.name, func(b *testing.B) {
				old := cpu.X86
				cpu.X86 = c.cpu
				defer func() { cpu.X86 = old }()
				for b.Loop() {
					if !ascii.ValidPrint(in.b) {
						b.Fatal("not printable")
					}
				}
			})
		}
	}
}
