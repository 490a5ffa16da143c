package natstest

import (
	"testing"

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
	ack, err := js.Publish(t.Context(), "t.a", []byte("x"))
	if err != nil || ack.Sequence != 1 {
		t.Fatal(ack, err)
	}
	c.Stop(0)
	if _, err := js.Publish(t.Context(), "t.a", []byte("y")); err != nil {
		t.Fatal("with two of three nodes: ", err)
	}
	c.Start(0)
}
