package lease

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/baton-run/baton/host/internal/jetstreamlog"
	"github.com/baton-run/baton/host/internal/natstest"
)

// connectWithToken connects as `baton serve --nats-token-file` does: the
// log's connection options, the log's Connect.
func connectWithToken(t *testing.T, c *natstest.Cluster, token string) (jetstream.JetStream, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := jetstreamlog.ConnectOptions(jetstreamlog.Options{TokenFile: f})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := jetstreamlog.Connect([]string{c.URLs()}, append(opts, nats.Name("lease test"))...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	return jetstream.New(nc)
}

func TestALeaseOverATokenConnection(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	js, err := connectWithToken(t, c, "s3cret")
	if err != nil {
		t.Fatalf("connect with the servers' token: %v", err)
	}
	l, err := Open(bounded(t), js, Options{Installation: "test", Host: "a", PID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(bounded(t)); err != nil {
		t.Fatal(err)
	}
	held, ok, err := l.Current(bounded(t))
	if err != nil || !ok {
		t.Fatalf("the lease after Acquire: held %v, %v", ok, err)
	}
	if diff := cmp.Diff(Holder{Host: "a", Since: held.Since, PID: 7}, held); diff != "" {
		t.Fatalf("the lease's holder (-want +got):\n%s", diff)
	}
	if err := l.Release(bounded(t)); err != nil {
		t.Fatal(err)
	}
}

func TestALeaseConnectionWithAWrongTokenFailsSayingSo(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	_, err := connectWithToken(t, c, "guess")
	if !errors.Is(err, jetstreamlog.ErrRefused) || !strings.Contains(err.Error(), "authorization failed") {
		t.Fatalf("connect with a wrong token: got %v, want the servers' refusal saying authorization failed", err)
	}
}

func TestALeaseWaitingForServersFailsWhenTheyRefuseIt(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	c.Stop(0)
	// Connect returns with the servers down, retrying them in the
	// background; they come up and refuse the token, and the client
	// library closes the connection.
	js, err := connectWithToken(t, c, "guess")
	if err != nil {
		t.Fatalf("connect with the servers down: %v; want a connection that waits for them", err)
	}
	c.Start(0)
	_, err = Open(bounded(t), js, Options{Installation: "test", Host: "a"})
	if err == nil || !errors.Is(err, nats.ErrConnectionClosed) || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("open the lease over a connection the servers refused: got %v, want it closed on an authorization violation", err)
	}
}
