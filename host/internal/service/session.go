package service

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/baton-run/baton/sdk/clock"
)

// Browser sessions. A browser signs in to the dashboard with a one-time
// code that a caller who already holds the service (the unix socket, or
// the bearer token) asked for: `baton ui`. The code is exchanged, once and
// before it expires, for a session whose id the browser keeps in an
// HttpOnly cookie; the token itself never reaches the browser. Codes and
// sessions live in the service's memory, kept by their SHA-256 (a memory
// dump shows no live secret), so a restart signs every browser out.

// Lifetimes and bounds of codes and sessions.
const (
	// loginCodeTTL is how long a code may wait to be opened: long enough
	// to switch to a browser, short enough that one left in a terminal's
	// scrollback is worth nothing.
	loginCodeTTL = 5 * time.Minute
	// sessionTTL is how long a browser stays signed in.
	sessionTTL = 12 * time.Hour
	// maxLoginCodes and maxSessions bound what the service holds: one more
	// pushes out the one nearest its end.
	maxLoginCodes = 64
	maxSessions   = 256
)

// sessions holds the login codes not yet used and the live sessions.
type sessions struct {
	clk clock.Clock

	mu    sync.Mutex
	codes map[string]loginCode // by the code's hash
	live  map[string]time.Time // session id's hash -> when it ends
}

// loginCode is a code waiting for its browser.
type loginCode struct {
	thread  string // the thread whose page the sign-in opens ("" the list)
	expires time.Time
}

func newSessions(clk clock.Clock) *sessions {
	return &sessions{clk: clk, codes: map[string]loginCode{}, live: map[string]time.Time{}}
}

// newCode makes a one-time code that opens thread's page (the list when
// thread is ""), and says until when it may be used.
func (s *sessions) newCode(thread string) (code string, expires time.Time) {
	code = secret()
	now := s.clk.Now()
	expires = now.Add(loginCodeTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.codes, now, func(c loginCode) time.Time { return c.expires }, maxLoginCodes)
	s.codes[digest(code)] = loginCode{thread: thread, expires: expires}
	return code, expires
}

// redeem exchanges a code for a new session: its id, when it ends, and the
// thread the code opens. ok is false for a code that is unknown, used or
// expired; a code is gone once tried.
func (s *sessions) redeem(code string) (sid, thread string, expires time.Time, ok bool) {
	now := s.clk.Now()
	s.mu.Lock()
	c, found := s.codes[digest(code)]
	delete(s.codes, digest(code))
	s.mu.Unlock()
	if !found || !now.Before(c.expires) {
		return "", "", time.Time{}, false
	}
	sid = secret()
	expires = now.Add(sessionTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.live, now, func(t time.Time) time.Time { return t }, maxSessions)
	s.live[digest(sid)] = expires
	return sid, c.thread, expires, true
}

// valid says whether sid is a live session.
func (s *sessions) valid(sid string) bool {
	if sid == "" {
		return false
	}
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.live[digest(sid)]
	if ok && !now.Before(end) {
		delete(s.live, digest(sid))
		return false
	}
	return ok
}

// end signs a session out.
func (s *sessions) end(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, digest(sid))
}

// prune drops m's entries that have ended, then, while m holds max or
// more, the one that ends first: room for one more.
func prune[V any](m map[string]V, now time.Time, ends func(V) time.Time, max int) {
	for k, v := range m {
		if !now.Before(ends(v)) {
			delete(m, k)
		}
	}
	for len(m) >= max {
		var first string
		var at time.Time
		for k, v := range m {
			if first == "" || ends(v).Before(at) {
				first, at = k, ends(v)
			}
		}
		delete(m, first)
	}
}

// secret is 32 random bytes, in hex (crypto/rand's Read never fails).
func secret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// digest is what sessions keep of a secret.
func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return string(h[:])
}
