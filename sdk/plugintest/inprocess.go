package plugintest

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/pluginclient"
	"github.com/baton-run/baton/sdk/server"
)

// InProcess serves an adapter's provider service in the test's own
// process, on a unix socket, and returns the host's client of it: the
// sdk's gRPC edge without go-plugin or a built binary, for a quick test of
// an adapter's answers. (Start is the real boundary: build and launch the
// plugin as the host does.) opts configure the gRPC server. Everything
// stops when the test ends.
func InProcess(t testing.TB, a sdk.Adapter, opts ...grpc.ServerOption) *pluginclient.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	server.Register(t.Context(), g, a, hclog.NewNullLogger())
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginclient.NewClient(t.Context(), conn)
}
