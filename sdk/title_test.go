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

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in      string
		n       int
		keepEnd bool
		want    string
	}{
		{"short", 5, false, "short"},
		{"abcdef", 3, false, "abc…"},
		{"abcdef", 3, true, "…def"},
		{"aé", 2, false, "a…"}, // é is 2 bytes: not cut inside
		{"éa", 2, true, "…a"},
		{"ééé", 4, false, "éé…"},
		{"ééé", 4, true, "…éé"},
		// Bytes that are not UTF-8: cut within a character's length.
		{"a\x80\x80\x80\x80\x80b", 5, false, "a\x80…"},
		{"a\x80\x80\x80\x80\x80b", 5, true, "…\x80b"},
	} {
		if got := Clip(c.in, c.n, c.keepEnd); got != c.want {
			t.Errorf("Clip(%q, %d, %v) = %q, want %q", c.in, c.n, c.keepEnd, got, c.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"Error: no key · é":     "Error: no key · é",
		"\x1b[31mred\x1b[0m":    `\x1b[31mred\x1b[0m`,
		"a\xffb\xc3":            `a\xffb\xc3`,
		"tab\there\nline\u2028": `tab\there\nline\u2028`,
		`"quoted" \ back`:       `"quoted" \ back`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
