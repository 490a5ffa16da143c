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
func connectWithToken(t *testing.T, c *natstest.Cluster, token string, extra ...nats.Option) (jetstream.JetStream, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := jetstreamlog.ConnectOptions(jetstreamlog.Options{TokenFile: f})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := jetstreamlog.Connect(bounded(t), []string{c.URLs()}, nil, append(append(opts, nats.Name("lease test")), extra...)...)
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

// A standby whose servers stop taking its token (replaced on the servers)
// is disconnected, and refused when it reconnects; the client library
// then closes its connection, and the lease fails saying why, rather
// than wait on a connection that never comes back.
func TestALeaseWhoseTokenTheServersNoLongerTakeFails(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	closed := make(chan struct{})
	js, err := connectWithToken(t, c, "s3cret", nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the refusals, which the test sees below
	if err != nil {
		t.Fatalf("connect with the servers' token: %v", err)
	}
	a, err := Open(bounded(t), js, Options{Installation: "test", Host: "a"})
	if err != nil {
		t.Fatal(err)
	}
	c.Reload(0, natstest.Token("replaced"))
	select {
	case <-closed:
	case <-bounded(t).Done():
		t.Fatal("the connection the servers refused was not closed")
	}
	for name, do := range map[string]func() error{
		"open":    func() error { _, err := Open(bounded(t), js, Options{Installation: "test", Host: "a"}); return err },
		"acquire": func() error { return a.Acquire(bounded(t)) },
	} {
		err := do()
		if !errors.Is(err, nats.ErrConnectionClosed) || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("%s the lease over a connection the servers refused: got %v, want it closed on an authorization violation", name, err)
		}
	}
}
