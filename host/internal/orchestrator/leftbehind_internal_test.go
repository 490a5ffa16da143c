package orchestrator

import (
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// leftBehind: a live session may take the provider's next run only while
// its conversation is the one the thread's binding goes on in.
func TestLeftBehind(t *testing.T) {
	th := domain.Thread{
		ProviderThreads: []domain.ProviderThread{
			{ID: "pt1", SessionID: "s1", ProviderRef: "c1", Detached: true},
			{ID: "pt2", SessionID: "s2", ProviderRef: "c2"},
		},
		ProviderSessions: []domain.ProviderSession{{ID: "s1"}, {ID: "s2"}, {ID: "s3", Resumed: "c1"}, {ID: "s4"}},
	}
	for _, c := range []struct {
		name    string
		b       domain.ProviderBinding
		session string
		want    bool
	}{
		{"its conversation goes on", domain.ProviderBinding{SessionID: "s2", ThreadRef: "c2"}, "s2", false},
		{"the conversation it started was left behind", domain.ProviderBinding{SessionID: "s1"}, "s1", true},
		{"the conversation it resumed was left behind", domain.ProviderBinding{SessionID: "s3"}, "s3", true},
		{"a fresh session with no conversation yet", domain.ProviderBinding{SessionID: "s4"}, "s4", false},
	} {
		if got := leftBehind(th, c.b, c.session); got != c.want {
			t.Errorf("%s: leftBehind = %v, want %v", c.name, got, c.want)
		}
	}
}
