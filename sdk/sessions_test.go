package sdk

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSessions(t *testing.T) {
	var tab Sessions[int]
	if _, err := tab.Get("s"); !errors.Is(err, ErrUnknownSession) {
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := tab.Get("s"); err != nil {
			_, err := tab.ForRequest("s", "req-1")
			if !errors.Is(err, ErrNotResumable) || !strings.Contains(err.Error(), "req-1") {
				t.Errorf("a request of a session gone: %v; want not resumable, naming the request", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a session whose provider is gone stayed in the table")
		}
	}
}
