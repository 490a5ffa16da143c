package sdk_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-run/baton/sdk"
)

// LimitEvidence joins the frames one a line, leaves out empty ones, and
// cuts to MaxLimitEvidence bytes between two characters.
func TestLimitEvidence(t *testing.T) {
	if got := sdk.LimitEvidence([]byte(`{"a":1}`), nil, []byte(`{"b":2}`)); got != "{\"a\":1}\n{\"b\":2}" {
		t.Fatalf("joined: %q", got)
	}
	long := strings.Repeat("é", sdk.MaxLimitEvidence)    // 2 bytes a character
	got := sdk.LimitEvidence([]byte("xy"), []byte(long)) // byte 4096 falls inside a character
	if len(got) > sdk.MaxLimitEvidence || len(got) < sdk.MaxLimitEvidence-3 || !utf8.ValidString(got) || !strings.HasPrefix("xy\n"+long, got) {
		t.Fatalf("cut to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := sdk.LimitEvidence[[]byte](); got != "" {
		t.Fatalf("no frames: %q", got)
	}
}
