package service_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
)

// Dial takes unix:///PATH, a bare path and tcp://HOST:PORT, and refuses
// plaintext to anything but loopback.
func TestDialTargets(t *testing.T) {
	for _, c := range []struct {
		target string
		opts   service.DialOptions
		err    string // "" when Dial accepts it
	}{
		{"unix:///tmp/baton.sock", service.DialOptions{}, ""},
		{"/tmp/baton.sock", service.DialOptions{}, ""},
		{"baton.sock", service.DialOptions{}, ""},
		{"tcp://127.0.0.1:7077", service.DialOptions{}, ""},
		{"tcp://[::1]:7077", service.DialOptions{}, ""},
		{"tcp://localhost:7077", service.DialOptions{}, ""},
		{"tcp://10.0.0.8:7077", service.DialOptions{}, "not a loopback address"},
		{"tcp://example.invalid:7077", service.DialOptions{}, "not a loopback address"},
		{"tcp://10.0.0.8:7077", service.DialOptions{TLS: true}, ""},
		{"tcp://127.0.0.1", service.DialOptions{}, "want tcp://HOST:PORT"},
		{"unix://relative.sock", service.DialOptions{}, "ABSOLUTE"},
		{"http://127.0.0.1:80", service.DialOptions{}, "want unix:///PATH"},
		{"", service.DialOptions{}, "no server address"},
		{"/tmp/baton.sock", service.DialOptions{TLS: true}, "TLS is for tcp://"},
		{"tcp://127.0.0.1:7077", service.DialOptions{TokenFile: "/nonexistent/token"}, "read token file"},
		{"tcp://127.0.0.1:7077", service.DialOptions{CAFile: "/nonexistent/ca.pem"}, "read CA file"},
	} {
		conn, err := service.Dial(t.Context(), c.target, c.opts)
		if conn != nil {
			conn.Close()
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Dial(%q, %+v): %v", c.target, c.opts, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Dial(%q, %+v) = %v; want an error saying %q", c.target, c.opts, err, c.err)
		}
	}
}

// A client reaches a service on its unix socket, by URL or by path;
// Check says when nothing answers.
func TestDialUnixSocket(t *testing.T) {
	e := newEnv(t, service.Options{})
	for _, target := range []string{"unix://" + e.sock, e.sock} {
		conn, err := service.Dial(t.Context(), target, service.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := service.Check(t.Context(), conn); err != nil {
			t.Errorf("Check(%s): %v", target, err)
		}
		if _, err := batonv1.NewBatonClient(conn).GetThread(t.Context(), &batonv1.GetThreadRequest{ThreadId: "thr_nope"}); status.Code(err) != codes.NotFound {
			t.Errorf("GetThread through %s: %v", target, err)
		}
		conn.Close()
	}
	conn, err := service.Dial(t.Context(), filepath.Join(shortDir(t), "none.sock"), service.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := service.Check(ctx, conn); err == nil {
		t.Error("Check of a socket nobody serves: nil")
	}
}

// The token file's token goes with every call as a bearer token.
func TestDialSendsBearerToken(t *testing.T) {
	e := newEnv(t, service.Options{})
	var mu sync.Mutex
	var got []string
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		got = append(got, strings.Join(md.Get("authorization"), ","))
		mu.Unlock()
		return h(ctx, req)
	}))
	srv := service.New(e.host, service.Options{})
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer func() {
		srv.Shutdown()
		g.Stop()
	}()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	for _, opts := range []service.DialOptions{{TokenFile: tok}, {}} {
		conn, err := service.Dial(t.Context(), "tcp://"+lis.Addr().String(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := service.Check(t.Context(), conn); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	if diff := cmp.Diff([]string{"Bearer s3cret", ""}, got); diff != "" {
		t.Errorf("authorization sent (-want +got):\n%s", diff)
	}
}

// InProcess serves a host through the same Server, health included; its
// stop ends the client's calls.
func TestInProcess(t *testing.T) {
	h, err := orchestrator.Open(orchestrator.Config{DataDir: t.TempDir(), PluginDirs: []string{pluginDir}, Logger: testLogger(t, "host")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	conn, stop, err := service.InProcess(h, service.Options{Logger: testLogger(t, "service")})
	if err != nil {
		t.Fatal(err)
	}
	if err := service.Check(t.Context(), conn); err != nil {
		t.Fatalf("Check: %v", err)
	}
	c := batonv1.NewBatonClient(conn)
	ws := t.TempDir()
	rc, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{CommandId: "c1", Provider: "acp", Cwd: ws,
		ProviderCommand: &batonv1.ProviderCommand{Argv: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListThreads(t.Context(), &batonv1.ListThreadsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list.GetThreads() {
		ids = append(ids, s.GetId()+" "+s.GetProvider()+" "+s.GetCwd())
	}
	if diff := cmp.Diff([]string{rc.GetThreadId() + " acp " + ws}, ids); diff != "" {
		t.Errorf("threads (-want +got):\n%s", diff)
	}
	stop()
	if _, err := c.ListThreads(t.Context(), &batonv1.ListThreadsRequest{}); err == nil {
		t.Error("a call after stop succeeded")
	}
}
