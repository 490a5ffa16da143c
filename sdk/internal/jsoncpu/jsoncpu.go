// Package jsoncpu makes github.com/segmentio/encoding take its scalar
// routines instead of its AVX ones; a package that decodes frames with it
// imports this one for that effect.
//
// Every decode of segmentio's JSON first checks its whole input with
// ascii.ValidPrint. Its AVX2 routine costs about 220 ns a call whatever the
// input's length on the 2-vCPU machines Baton is measured on (235 ns for a
// 180-byte frame, 287 ns for 4 KiB), its scalar one 23 ns for the frame and
// 345 ns for 4 KiB (BenchmarkValidPrint). A provider's frames are a few
// hundred bytes and each is decoded two or three times, so the AVX path
// cost a plugin a sixth of its CPU. Only segmentio's own feature set is
// changed: the Go runtime and the standard library choose theirs apart.
package jsoncpu

import (
	"github.com/segmentio/asm/cpu"
	"github.com/segmentio/asm/cpu/x86"
)

func init() { cpu.X86 &^= avx }

// avx is every AVX feature bit, AVX through AVX-512's last.
const avx = x86.CPU(x86.AVX512VPOPCNTDQ<<1 - x86.AVX)
