package pluginclient

import (
	"fmt"
	"strings"
	"testing"
)

// The stderr tail keeps the end, in whole lines, however it was written.
func TestStderrTailKeepsTheEndInWholeLines(t *testing.T) {
	var tl tail
	var all strings.Builder
	for i := range 2000 {
		line := fmt.Sprintf("line %d of the plugin's stderr\n", i)
		all.WriteString(line)
		tl.Write([]byte(line[:5])) // go-plugin writes a line, then its newline
		tl.Write([]byte(line[5:]))
	}
	got := tl.String()
	whole := strings.TrimRight(all.String(), "\n")
	if len(got) > StderrTailBytes || !strings.HasSuffix(whole, got) || !strings.HasPrefix(got, "line ") ||
		!strings.Contains(whole, "\n"+got) || len(got) < StderrTailBytes-64 {
		t.Fatalf("tail of %d bytes, not the end of the stderr in whole lines:\n%.200s…", len(got), got)
	}
	var short tail
	short.Write([]byte("panic: boom\n\ngoroutine 1\n"))
	if got := short.String(); got != "panic: boom\n\ngoroutine 1" {
		t.Errorf("a short stderr's tail: %q", got)
	}
}
