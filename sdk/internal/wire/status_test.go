package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/sdk"
)

// Errors keep their identity across the plugin boundary.
func TestStatusRoundTrip(t *testing.T) {
	for _, m := range statusTable {
		err := FromStatus(ToStatus(fmt.Errorf("doing x: %w", m.err)))
		if !errors.Is(err, m.err) {
			t.Errorf("%v did not survive the round trip: %v", m.err, err)
		}
		if err.Error() != "doing x: "+m.err.Error() {
			t.Errorf("message %q changed", err.Error())
		}
	}
	if err := FromStatus(ToStatus(context.Canceled)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if err := FromStatus(ToStatus(context.DeadlineExceeded)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	if err := FromStatus(ToStatus(errors.New("plain"))); err.Error() != "plain" {
		t.Errorf("plain: %v", err)
	}
	if err := FromStatus(status.Error(codes.Unavailable, "connection refused")); !errors.Is(err, sdk.ErrPluginUnavailable) {
		t.Errorf("a bare Unavailable means the plugin is gone: %v", err)
	}
	if ToStatus(nil) != nil || FromStatus(nil) != nil {
		t.Error("nil must stay nil")
	}
	if err := FromStatus(errors.New("not a status")); err.Error() != "not a status" {
		t.Errorf("non-status: %v", err)
	}
}

// An error told in its own words (sdk.Kindf) crosses the boundary with its
// kind and its words alone.
func TestKindfRoundTrip(t *testing.T) {
	const msg = "the agent exited with status 1 before answering initialize: no key"
	err := FromStatus(ToStatus(sdk.Kindf(sdk.ErrProviderExited, "the agent exited with status %d before answering initialize: no key", 1)))
	if !errors.Is(err, sdk.ErrProviderExited) || err.Error() != msg {
		t.Fatalf("across the boundary: %v; want sdk.ErrProviderExited saying %q", err, msg)
	}
}
