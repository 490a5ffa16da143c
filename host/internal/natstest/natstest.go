// Package natstest runs NATS servers with JetStream inside a test process,
// on 127.0.0.1 only: one node, or a cluster of three whose nodes a test can
// stop and start again (with their stores) to see the log through a node's
// loss, a quorum's, and a restart. SingleWith starts a node with options
// of the test's: auth.go makes what a node may ask of its clients (a
// token, TLS client certificates, operator-mode credentials) and the
// files a client is given.
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
	opts  *server.Options
	srv   *server.Server
	fatal chan string // the first fatal error the running server reported
}

// Single starts one JetStream node; it stops when the test ends.
func Single(t testing.TB) *Cluster {
	t.Helper()
	return SingleWith(t, nil)
}

// SingleWith starts one JetStream node whose options set changes first
// (authorization, TLS, operator mode: what a test of a client's
// credentials needs); it stops when the test ends. The node stays on
// 127.0.0.1 with a kernel-bound client port whatever set does.
func SingleWith(t testing.TB, set func(*server.Options)) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	o := nodeOptions("n1", filepath.Join(t.TempDir(), "n1"), "")
	if set != nil {
		set(o)
	}
	o.Host = "127.0.0.1"
	o.Port = server.RANDOM_PORT // bound by the kernel: no other test can take it first
	c.nodes = append(c.nodes, &Node{opts: o})
	c.Start(0)
	t.Cleanup(c.stopAll)
	return c
}

// Three starts a cluster of three JetStream nodes (streams in it may have
// three replicas) and waits until its meta leader counts all three as
// current peers; it stops when the test ends.
//
// Client ports are bound by the kernel. Route ports must be known before
// the nodes start (each names the others), so they are found free first;
// one taken in between by a parallel test makes its node fail to listen,
// and the cluster starts again on fresh ports.
func Three(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	// The stores' directory is made before the cleanup that stops the
	// nodes is registered, so that it is removed after they stopped
	// (cleanups run last first).
	base := t.TempDir()
	t.Cleanup(c.stopAll)
	const attempts = 5
	for attempt := 1; ; attempt++ {
		c.stopAll()
		c.nodes = nil
		ports := freePorts(t, 3)
		for i := range 3 {
			name := fmt.Sprintf("n%d", i+1)
			o := nodeOptions(name, filepath.Join(base, fmt.Sprint(attempt), name), "baton-test")
			o.Port = server.RANDOM_PORT
			o.Cluster.Port = ports[i]
			for j, p := range ports {
				if j != i {
					o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
				}
			}
			c.nodes = append(c.nodes, &Node{opts: o})
		}
		for i := range c.nodes {
			c.startNoWait(i)
		}
		var failed error
		for i := range c.nodes {
			if err := c.ready(i); err != nil {
				failed = err
				break
			}
		}
		if failed == nil {
			break
		}
		if attempt == attempts {
			t.Fatalf("a three-node nats cluster did not start in %d attempts: %v", attempts, failed)
		}
		t.Logf("starting the nats cluster again on fresh ports: %v", failed)
	}
	c.WaitLeader()
	return c
}

// nodeOptions are a node's: its name, its store's directory, and its
// cluster's name ("": a node alone).
func nodeOptions(name, store, cluster string) *server.Options {
	o := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		JetStream:  true,
		StoreDir:   store,
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

// freePorts finds n ports free on 127.0.0.1 now. A server started on one
// a moment later almost always gets it; Three starts again when not.
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

// Reload changes running node i's options as a new configuration and a
// SIGHUP would (a token replaced, say), and keeps them for a later Start.
func (c *Cluster) Reload(i int, set func(*server.Options)) {
	c.t.Helper()
	n := c.nodes[i]
	o := n.opts.Clone()
	set(o)
	if err := n.srv.ReloadOptions(o); err != nil {
		c.t.Fatalf("reload nats node %s: %v", o.ServerName, err)
	}
	n.opts = o
}

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
	n.fatal = make(chan string, 1)
	s.SetLogger(fatalLogger(n.fatal), false, false)
	go s.Start()
	n.srv = s
}

func (c *Cluster) waitReady(i int) {
	c.t.Helper()
	if err := c.ready(i); err != nil {
		c.t.Fatal(err)
	}
}

// ready waits until node i takes clients, or says why it cannot. Both are
// events the server signals; the bound is for a node that neither comes up
// nor fails, not a guess of how long it takes.
func (c *Cluster) ready(i int) error {
	n := c.nodes[i]
	up := make(chan bool, 1)
	go func() { up <- n.srv.ReadyForConnections(time.Minute) }()
	select {
	case msg := <-n.fatal:
		c.Stop(i)
		return fmt.Errorf("nats node %s did not start: %s", n.opts.ServerName, msg)
	case ok := <-up:
		if !ok {
			return fmt.Errorf("nats node %s did not start in a minute", n.opts.ServerName)
		}
	}
	// A node asked for a kernel-bound port keeps the one it got, so that it
	// starts again where clients know it.
	n.opts.Port = n.srv.Addr().(*net.TCPAddr).Port
	return nil
}

// fatalLogger passes on the first fatal error a server reports (it cannot
// listen, JetStream cannot start) and drops the rest of its log.
type fatalLogger chan string

func (l fatalLogger) Fatalf(format string, v ...any) {
	select {
	case l <- fmt.Sprintf(format, v...):
	default:
	}
}
func (fatalLogger) Noticef(string, ...any) {}
func (fatalLogger) Warnf(string, ...any)   {}
func (fatalLogger) Errorf(string, ...any)  {}
func (fatalLogger) Debugf(string, ...any)  {}
func (fatalLogger) Tracef(string, ...any)  {}

// WaitLeader waits until the cluster's JetStream has a meta leader that
// counts every running node as a current peer (before that, a stream with
// a replica per node may not be placed in time); a cluster of one has no
// meta group and is ready once it runs.
func (c *Cluster) WaitLeader() {
	c.t.Helper()
	if len(c.nodes) == 1 {
		return
	}
	running := 0
	for _, n := range c.nodes {
		if n.srv != nil {
			running++
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.srv != nil && n.srv.JetStreamIsLeader() && len(n.srv.JetStreamClusterPeers()) >= running {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // no event to wait on: the server exposes no leader channel
	}
	c.t.Fatalf("the nats cluster had no JetStream leader counting its %d running nodes in a minute", running)
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
