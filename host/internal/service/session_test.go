package service

import (
	"testing"
	"time"

	"github.com/baton-run/baton/sdk/clock"
)

// Codes work once and until loginCodeTTL; sessions until sessionTTL or
// sign-out; each is bounded, the one nearest its end making room.
func TestSessionsLifetimes(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	ss := newSessions(clk)

	code, expires := ss.newCode("thr1")
	if want := clk.Now().Add(loginCodeTTL); !expires.Equal(want) {
		t.Errorf("code expires %v, want %v", expires, want)
	}
	late, _ := ss.newCode("")
	clk.Advance(loginCodeTTL - time.Second)
	sid, thread, until, ok := ss.redeem(code)
	if !ok || thread != "thr1" || !until.Equal(clk.Now().Add(sessionTTL)) || !ss.valid(sid) {
		t.Fatalf("redeem a fresh code: %q %q %v %v", sid, thread, until, ok)
	}
	if _, _, _, ok := ss.redeem(code); ok {
		t.Error("a code redeemed twice")
	}
	clk.Advance(time.Second)
	if _, _, _, ok := ss.redeem(late); ok {
		t.Error("a code redeemed at its expiry")
	}
	if _, _, _, ok := ss.redeem("nope"); ok || ss.valid("") || ss.valid("nope") {
		t.Error("an unknown code or session passed")
	}

	clk.Advance(until.Sub(clk.Now()) - time.Second)
	if !ss.valid(sid) {
		t.Error("a session ended before its time")
	}
	clk.Advance(time.Second)
	if ss.valid(sid) {
		t.Error("a session outlived sessionTTL")
	}
	if len(ss.live) != 0 {
		t.Errorf("an ended session is still held: %d", len(ss.live))
	}

	code, _ = ss.newCode("")
	sid, _, _, _ = ss.redeem(code)
	ss.end(sid)
	if ss.valid(sid) {
		t.Error("a session signed out is still valid")
	}
}

func TestSessionsBounded(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	ss := newSessions(clk)
	first, _ := ss.newCode("")
	var last string
	for range maxLoginCodes {
		clk.Advance(time.Millisecond)
		last, _ = ss.newCode("")
	}
	if len(ss.codes) != maxLoginCodes {
		t.Errorf("%d codes held, want %d", len(ss.codes), maxLoginCodes)
	}
	if _, _, _, ok := ss.redeem(first); ok {
		t.Error("the oldest code was kept past the bound")
	}
	var sids []string
	for range maxSessions + 1 {
		clk.Advance(time.Millisecond)
		c, _ := ss.newCode("")
		sid, _, _, _ := ss.redeem(c)
		sids = append(sids, sid)
	}
	if len(ss.live) != maxSessions || ss.valid(sids[0]) || !ss.valid(sids[len(sids)-1]) {
		t.Errorf("sessions: %d held, first valid %v; want %d, the first dropped", len(ss.live), ss.valid(sids[0]), maxSessions)
	}
	if _, _, _, ok := ss.redeem(last); !ok {
		t.Error("the newest code was dropped")
	}
}
