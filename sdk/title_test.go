package sdk

import (
	"strings"
	"testing"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("é", 130)
	for _, c := range []struct{ in, want string }{
		{"  Say hi\nthen more", "Say hi"},
		{"\n\none line", "one line"},
		{"", ""},
		{long, strings.Repeat("é", 119) + "…"},
		{strings.Repeat("a", 120), strings.Repeat("a", 120)},
	} {
		if got := Title(c.in); got != c.want {
			t.Errorf("Title(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRelPath(t *testing.T) {
	for _, c := range []struct{ cwd, in, want string }{
		{"/ws", "/ws/a/b.txt", "a/b.txt"},
		{"/ws", "/ws", "."},
		{"/ws", "/other/x", "/other/x"},
		{"/ws", "/ws/../x", "/ws/../x"},
		{"/ws", "/ws2/x", "/ws2/x"},
		{"/ws", "/ws/..x", "..x"},
		{"/ws", "rel/x", "rel/x"},
		{"", "/ws/x", "/ws/x"},
	} {
		if got := RelPath(c.cwd, c.in); got != c.want {
			t.Errorf("RelPath(%q, %q) = %q, want %q", c.cwd, c.in, got, c.want)
		}
	}
}
