// Package natstest runs NATS servers with JetStream inside a test process,
// on 127.0.0.1 only: one node, or a cluster of three whose nodes a test can
// stop and start again (with their stores) to see the log through a node's
// loss, a quorum's, and a restart.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a set of running (or stopped) JetStream nodes.
type Cluster struct {
	t     testing.TB
	nodes []*Node
}

// Node is one nats-server: its options are kept so that it starts again
// on the same ports with the same store.
type Node struct {
	opts *server.Options
	srv  *server.Server
}

// Single starts one JetStream node; it stops when the test ends.
func Single(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	o := nodeOptions(t, "n1", "")
	c.nodes = append(c.nodes, &Node{opts: o})
	c.Start(0)
	t.Cleanup(c.stopAll)
	return c
}

// Three starts a cluster of three JetStream nodes (streams in it may have
// three replicas) and waits until it has a meta leader; it stops when the
// test ends.
func Three(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	for i := range 3 {
		o := nodeOptions(t, fmt.Sprintf("n%d", i+1), "baton-test")
		o.Cluster.Port = ports[i]
		for j, r := range routes {
			if j != i {
				u, _ := url.Parse(r) // written above
				o.Routes = append(o.Routes, u)
			}
		}
		c.nodes = append(c.nodes, &Node{opts: o})
	}
	for i := range c.nodes {
		c.startNoWait(i)
	}
	for i := range c.nodes {
		c.waitReady(i)
	}
	c.WaitLeader()
	t.Cleanup(c.stopAll)
	return c
}

func nodeOptions(t testing.TB, name, cluster string) *server.Options {
	o := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       freePorts(t, 1)[0],
		JetStream:  true,
		StoreDir:   filepath.Join(t.TempDir(), name),
		NoLog:      true,
		NoSigs:     true,
		// The default 1 MiB is what a server has unless told; tests keep it,
		// so that what fits here fits a default server.
	}
	if cluster != "" {
		o.Cluster.Name = cluster
		o.Cluster.Host = "127.0.0.1"
	}
	return o
}

// freePorts finds n ports free on 127.0.0.1 now (a server started on one
// a moment later is all but certain to get it).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// URLs is the client URLs of every node, comma-separated, as
// `baton serve --store` takes them.
func (c *Cluster) URLs() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port))
	}
	return strings.Join(us, ",")
}

// Len is how many nodes the cluster has.
func (c *Cluster) Len() int { return len(c.nodes) }

// Server is node i's running server (nil when stopped).
func (c *Cluster) Server(i int) *server.Server { return c.nodes[i].srv }

// Stop shuts node i down (its store stays, for Start).
func (c *Cluster) Stop(i int) {
	n := c.nodes[i]
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// Start starts node i (again), on its ports with its store, and waits
// until it takes clients.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	c.startNoWait(i)
	c.waitReady(i)
}

func (c *Cluster) startNoWait(i int) {
	c.t.Helper()
	n := c.nodes[i]
	if n.srv != nil {
		return
	}
	s, err := server.NewServer(n.opts)
	if err != nil {
		c.t.Fatalf("nats node %s: %v", n.opts.ServerName, err)
	}
	go s.Start()
	n.srv = s
}

func (c *Cluster) waitReady(i int) {
	c.t.Helper()
	n := c.nodes[i]
	// Readiness is an event the server signals; the bound is for a node
	// that never comes up, not a guess of how long it takes.
	if !n.srv.ReadyForConnections(time.Minute) {
		c.t.Fatalf("nats node %s did not start", n.opts.ServerName)
	}
}

// WaitLeader waits until the cluster's JetStream has a meta leader (a
// cluster of one has no meta group: it is ready once it runs).
func (c *Cluster) WaitLeader() {
	c.t.Helper()
	if len(c.nodes) == 1 {
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.srv != nil && n.srv.JetStreamIsLeader() {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // no event to wait on: the server exposes no leader channel
	}
	c.t.Fatal("the nats cluster elected no JetStream leader in a minute")
}

func (c *Cluster) stopAll() {
	for i := range c.nodes {
		c.Stop(i)
	}
}

// NodeLossTest skips a test that stops nodes of a three-node cluster
// under it unless BATON_NATS_NODE_LOSS is set (make nats-node-loss-test):
// such a test waits out JetStream's elections (4 to 9 s each, not
// configurable), and one of them was seen to hang once in a loaded run,
// so the default suite does not carry them until that is understood.
func NodeLossTest(t testing.TB) {
	t.Helper()
	if os.Getenv("BATON_NATS_NODE_LOSS") == "" {
		t.Skip("stops cluster nodes: run with make nats-node-loss-test (BATON_NATS_NODE_LOSS=1)")
	}
}
