package scenario

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk/clock"
)

// A script's pause (sleepMs, honoured when recording against a real
// provider) is on the host's clock, and ends early with the run's context.
func TestSleepIsOnTheHostsClock(t *testing.T) {
	f := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	// The thread's provider must be installed; it is never started (a
	// pause sends nothing), so an empty locked file stands for it.
	plugins := t.TempDir()
	if err := os.WriteFile(filepath.Join(plugins, pluginhost.BinaryPrefix+"acp"), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := pluginhost.Lock(plugins); err != nil {
		t.Fatal(err)
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: t.TempDir(), PluginDirs: []string{plugins}, Clock: f})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rc, err := h.Dispatch(t.Context(), domain.Command{ID: "create", Payload: domain.CreateThread{Provider: "acp", Cwd: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Parse([]byte(`{"steps":[{"sleepMs":1500}]}`))
	if err != nil {
		t.Fatal(err)
	}
	guard, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- Run(t.Context(), Host(h), rc.ThreadID, sc, Options{Sleep: true}) }()
	if err := f.WaitTimers(guard, 1); err != nil {
		t.Fatalf("the pause is not on the host's clock: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{1500 * time.Millisecond}, f.Pending()); diff != "" {
		t.Fatalf("pending timers (-want +got):\n%s", diff)
	}
	select {
	case err := <-done:
		t.Fatalf("the script ended before its pause did: %v", err)
	default:
	}
	f.Advance(1500 * time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("script: %v", err)
		}
	case <-guard.Done():
		t.Fatal("the script still pauses after its time")
	}

	stop := errors.New("recording stopped")
	ctx, stopRun := context.WithCancelCause(t.Context())
	go func() { done <- Run(ctx, Host(h), rc.ThreadID, sc, Options{Sleep: true}) }()
	if err := f.WaitTimers(guard, 1); err != nil {
		t.Fatal(err)
	}
	stopRun(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Errorf("script stopped during its pause: %v, want %v", err, stop)
		}
	case <-guard.Done():
		t.Fatal("the script's pause outlived its context")
	}
	if p := f.Pending(); len(p) != 0 {
		t.Errorf("timers left pending: %v", p)
	}
}
