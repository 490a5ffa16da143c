// Package ids allocates app ids from one random source, which a test can
// seed to get the same ids every run. Most ids are a prefix and 16 hex
// digits; NewTimeID's also begin with the time they were made, so that they
// sort by it (a thread's).
package ids

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Allocator hands out ids; it is safe for concurrent use.
type Allocator struct {
	mu  sync.Mutex
	src *rand.ChaCha8
	// last is the newest time-ordered id made, for the next one made in
	// the same millisecond (or after the clock went back) to follow it.
	last stamp
	made bool
}

// New returns an allocator seeded from the operating system.
func New() *Allocator {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	return &Allocator{src: rand.NewChaCha8(seed)}
}

// Seeded returns an allocator whose ids are a function of seed (and, for
// NewTimeID, of the times given).
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

// NewTimeID returns prefix_<26 base32 digits>: a ULID (48 bits of at's Unix
// milliseconds, then 80 random bits) in Crockford's base32, lower case, so
// that ids made later compare greater as strings. An id made in the same
// millisecond as the allocator's last one, or at an earlier time (a clock
// that went back), is the last one plus one: an allocator's ids sort in the
// order it made them, and a fake clock that stands still still gets ids
// that sort.
//
// The random bits are drawn whether used or not, so that a seeded
// allocator's other ids do not depend on the times given.
func (a *Allocator) NewTimeID(prefix string, at time.Time) string {
	a.mu.Lock()
	s := stamp{ms: millis(at), hi: a.src.Uint64() & (1<<16 - 1), lo: a.src.Uint64()}
	if a.made && s.ms <= a.last.ms {
		s = a.last.next()
	}
	a.last, a.made = s, true
	a.mu.Unlock()
	return prefix + "_" + s.String()
}

// maxMillis is the latest time a ULID holds: 48 bits of milliseconds (the
// year 10889).
const maxMillis = 1<<48 - 1

// millis is at in Unix milliseconds, within what a ULID holds: a time
// before 1970 is 0, one after maxMillis is maxMillis.
func millis(at time.Time) uint64 {
	ms := at.UnixMilli()
	switch {
	case ms < 0:
		return 0
	case ms > maxMillis:
		return maxMillis
	}
	return uint64(ms)
}

// stamp is a ULID: a time in milliseconds and 80 random bits (hi holds the
// top 16).
type stamp struct {
	ms, hi, lo uint64
}

// next is the ULID after s: its random bits plus one, carried into the
// time when all 80 are set (2^-80 odds for random bits; what keeps the
// order then is a millisecond later).
func (s stamp) next() stamp {
	s.lo++
	if s.lo == 0 {
		s.hi++
	}
	if s.hi == 1<<16 {
		s.hi = 0
		s.ms = min(s.ms+1, maxMillis)
	}
	return s
}

// crockford is Crockford's base32 alphabet in lower case: digits before
// letters, in ASCII order, so that the strings compare as the numbers do.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// String is the ULID's 26 digits: 130 bits, the top two zero, five bits a
// digit, most significant first.
func (s stamp) String() string {
	hi, lo := s.ms<<16|s.hi, s.lo // the 128 bits
	var b [26]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}
