package pluginclient

import (
	"bytes"
	"sync"
)

// StderrTailBytes is how much of a plugin's stderr its Plugin keeps: the
// end of it, where a crashing plugin says why (a Go plugin's panic and the
// stack of the goroutine that panicked fit in it).
const StderrTailBytes = 8 << 10

// tail keeps the last StderrTailBytes written to it, in whole lines.
type tail struct {
	mu  sync.Mutex
	buf []byte
	cut bool // bytes before buf were dropped
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*StderrTailBytes { // drop in bulk, not at every write
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-StderrTailBytes:]...)
		t.cut = true
	}
	return len(p), nil
}

// String is the tail: at most StderrTailBytes, starting at a line's start,
// without the trailing newline.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, cut := t.buf, t.cut
	if len(b) > StderrTailBytes {
		b, cut = b[len(b)-StderrTailBytes:], true
	}
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:] // the first line is a part of one
		}
	}
	return string(bytes.TrimRight(b, "\n"))
}
