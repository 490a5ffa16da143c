package natstest

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestThreeNodesTakeAReplicatedStream(t *testing.T) {
	c := Three(t)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// A replicated stream answers once its leader is elected, which may
	// come after CreateStream returns (and again after a node stops):
	// each publish retries "no responders" every 250 ms until it is
	// answered, within a minute.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ack, err := js.Publish(ctx, "t.a", []byte("x"), jetstream.WithRetryAttempts(240))
	if err != nil || ack.Sequence != 1 {
		t.Fatal(ack, err)
	}
	c.Stop(0)
	// The two left elect a leader again (and the client may reconnect to
	// one of them): on a loaded machine that took over the first publish's
	// minute once, so this publish has two of its own.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel2()
	if _, err := js.Publish(ctx2, "t.a", []byte("y"), jetstream.WithRetryAttempts(480)); err != nil {
		t.Fatal("with two of three nodes: ", err)
	}
	c.Start(0)
}

func TestANodeThatCannotListenSaysWhy(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	store := filepath.Join(t.TempDir(), "n1") // removed after the node stops
	c := &Cluster{t: t}
	t.Cleanup(c.stopAll)
	o := nodeOptions("n1", store, "")
	o.Port = taken.Addr().(*net.TCPAddr).Port
	c.nodes = append(c.nodes, &Node{opts: o})
	c.startNoWait(0)
	err = c.ready(0)
	if err == nil || !strings.Contains(err.Error(), "nats node n1 did not start: Error listening on port") {
		t.Fatalf("a node whose port is taken: got %v, want the server's listen error", err)
	}
	if c.Server(0) != nil {
		t.Fatal("the node that could not listen is still counted as running")
	}
}

func TestSingleWithTakesTheServerOptions(t *testing.T) {
	c := SingleWith(t, func(o *server.Options) { o.Authorization = "s3cret" })
	if nc, err := nats.Connect(c.URLs()); err == nil {
		nc.Close()
		t.Fatal("a client without the token connected to a node that asks for one")
	}
	nc, err := nats.Connect(c.URLs(), nats.Token("s3cret"))
	if err != nil {
		t.Fatalf("a client with the node's token: %v", err)
	}
	nc.Close()
}
