package sdk

import (
	"errors"
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
	close(gone)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := tab.Get("s"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a session whose provider is gone stayed in the table")
		}
	}
}
