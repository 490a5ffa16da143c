// Package ids allocates app ids: a prefix and 16 hex digits from one random
// source, which a test can seed to get the same ids every run.
package ids

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
)

// Allocator hands out ids; it is safe for concurrent use.
type Allocator struct {
	mu  sync.Mutex
	src *rand.ChaCha8
}

// New returns an allocator seeded from the operating system.
func New() *Allocator {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	return &Allocator{src: rand.NewChaCha8(seed)}
}

// Seeded returns an allocator whose ids are a function of seed.
func Seeded(seed uint64) *Allocator {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return &Allocator{src: rand.NewChaCha8(s)}
}

// NewID returns prefix_<16 hex digits>.
func (a *Allocator) NewID(prefix string) string {
	a.mu.Lock()
	v := a.src.Uint64()
	a.mu.Unlock()
	return fmt.Sprintf("%s_%016x", prefix, v)
}
