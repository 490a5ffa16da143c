package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The handoff of a long thread keeps its newest turns within maxHandoff
// bytes and says how many older ones it left out.
func TestHandoffBound(t *testing.T) {
	long := strings.Repeat("x", maxHandoff/2)
	earlier := []exchange{{"first", long}, {"second", long}, {"third", long}, {"fourth", "short"}}
	got := Handoff(earlier, "now")
	turn := func(p, a string) string { return "User: " + p + "\nAssistant: " + a + "\n" }
	want := "[Earlier turns of this conversation]\n(2 earlier turns left out)\n" +
		turn("third", long) + "\n" + turn("fourth", "short") + "\n[New message]\nnow"
	short := func(s string) string { return strings.ReplaceAll(s, long, "<long>") }
	if diff := cmp.Diff(short(want), short(got)); diff != "" {
		t.Errorf("handoff (-want +got):\n%s", diff)
	}
	// One turn longer than the bound is still handed off: the newest
	// turn is never left out.
	huge := strings.Repeat("y", maxHandoff+1)
	if got := Handoff([]exchange{{"q", huge}}, "now"); !strings.Contains(got, huge) || strings.Contains(got, "left out") {
		t.Errorf("a turn over the bound was left out")
	}
	if got := Handoff(nil, "now"); got != "now" {
		t.Errorf("first turn's prompt = %q", got)
	}
}

// A read that ends inside a character keeps the character's start for
// the next read.
func TestComplete(t *testing.T) {
	e := []byte("é") // 0xc3 0xa9
	for _, c := range []struct {
		in   []byte
		want int
	}{
		{[]byte("ab"), 2},
		{append([]byte("a"), e[0]), 1},
		{append([]byte("a"), e...), 3},
		{[]byte("a\xff"), 2}, // not a character's start: nothing to wait for
		{append([]byte("a"), "€"[:2]...), 1},
		{nil, 0},
	} {
		if got := complete(c.in); got != c.want {
			t.Errorf("complete(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		argv  []string
		stdin bool
		want  []string
	}{
		{[]string{"agent", "-q"}, false, []string{"agent", "-q", "P"}},
		{[]string{"agent", PromptPlaceholder, "-q"}, false, []string{"agent", "P", "-q"}},
		{[]string{"agent", "-q"}, true, []string{"agent", "-q"}},
	} {
		if diff := cmp.Diff(c.want, Argv(c.argv, "P", c.stdin)); diff != "" {
			t.Errorf("Argv(%q, stdin %v) (-want +got):\n%s", c.argv, c.stdin, diff)
		}
	}
}
