package sessions

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk"
)

func TestRequests(t *testing.T) {
	var r Requests[string] // the zero value is ready
	if _, err := r.Get("req-1"); !errors.Is(err, sdk.ErrUnknownRequest) || !strings.Contains(err.Error(), "req-1") {
		t.Fatalf("a request never opened: %v; want unknown, naming it", err)
	}
	if d := cmp.Diff([]string(nil), r.TakeAll()); d != "" {
		t.Fatalf("no requests (-want +got):\n%s", d)
	}
	r.Open("req-3", "c")
	r.Open("req-1", "a")
	r.Open("req-2", "b")
	if q, err := r.Get("req-1"); err != nil || q != "a" {
		t.Fatalf("get: %q %v", q, err)
	}
	if q, ok := r.Take("req-1"); !ok || q != "a" {
		t.Fatalf("take: %q %v", q, ok)
	}
	if _, ok := r.Take("req-1"); ok {
		t.Error("a request was resolved twice")
	}
	if _, err := r.Get("req-1"); !errors.Is(err, sdk.ErrUnknownRequest) {
		t.Errorf("a resolved request: %v; want unknown", err)
	}
	if d := cmp.Diff([]string{"b", "c"}, r.TakeAll()); d != "" {
		t.Errorf("the requests left, by ref (-want +got):\n%s", d)
	}
	if _, ok := r.Take("req-2"); ok {
		t.Error("a request TakeAll resolved is still open")
	}
}
