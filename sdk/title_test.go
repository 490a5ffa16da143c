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
