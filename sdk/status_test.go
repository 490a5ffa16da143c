package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors keep their identity across the plugin boundary.
func TestStatusRoundTrip(t *testing.T) {
	for _, m := range statusTable {
		err := fromStatus(toStatus(fmt.Errorf("doing x: %w", m.err)))
		if !errors.Is(err, m.err) {
			t.Errorf("%v did not survive the round trip: %v", m.err, err)
		}
		if err.Error() != "doing x: "+m.err.Error() {
			t.Errorf("message %q changed", err.Error())
		}
	}
	if err := fromStatus(toStatus(context.Canceled)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if err := fromStatus(toStatus(context.DeadlineExceeded)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	if err := fromStatus(toStatus(errors.New("plain"))); err.Error() != "plain" {
		t.Errorf("plain: %v", err)
	}
	if err := fromStatus(status.Error(codes.Unavailable, "connection refused")); !errors.Is(err, ErrPluginUnavailable) {
		t.Errorf("a bare Unavailable means the plugin is gone: %v", err)
	}
	if toStatus(nil) != nil || fromStatus(nil) != nil {
		t.Error("nil must stay nil")
	}
	if err := fromStatus(errors.New("not a status")); err.Error() != "not a status" {
		t.Errorf("non-status: %v", err)
	}
}

// An error told in its own words (Kindf) crosses the boundary with its
// kind and its words alone.
func TestKindfRoundTrip(t *testing.T) {
	const msg = "the agent exited with status 1 before answering initialize: no key"
	err := fromStatus(toStatus(Kindf(ErrProviderExited, "the agent exited with status %d before answering initialize: no key", 1)))
	if !errors.Is(err, ErrProviderExited) || err.Error() != msg {
		t.Fatalf("across the boundary: %v; want ErrProviderExited saying %q", err, msg)
	}
}
