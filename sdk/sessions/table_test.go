package sessions

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/baton-run/baton/sdk"
)

func TestSessions(t *testing.T) {
	// The table forgets a session from a goroutine of its own; the bubble
	// tells when that goroutine is done, without polling.
	synctest.Test(t, func(t *testing.T) {
		var tab Table[int]
		if _, err := tab.Get("s"); !errors.Is(err, sdk.ErrUnknownSession) {
			t.Fatalf("unknown: %v", err)
		}
		gone := make(chan struct{})
		tab.Add("s", 7, gone)
		if v, err := tab.Get("s"); err != nil || v != 7 {
			t.Fatalf("get: %v %v", v, err)
		}
		if v, err := tab.ForRequest("s", "req-1"); err != nil || v != 7 {
			t.Fatalf("for a request: %v %v", v, err)
		}
		close(gone)
		synctest.Wait()
		if _, err := tab.Get("s"); !errors.Is(err, sdk.ErrUnknownSession) {
			t.Fatalf("a session whose provider is gone: %v; want it gone from the table", err)
		}
		_, err := tab.ForRequest("s", "req-1")
		if !errors.Is(err, sdk.ErrNotResumable) || !strings.Contains(err.Error(), "req-1") {
			t.Errorf("a request of a session gone: %v; want not resumable, naming the request", err)
		}
	})
}
