package service_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/service"
)

// served is a Run in a goroutine.
type served struct {
	addrs []string
	done  chan error
	stop  context.CancelFunc
}

// serve runs the service and waits until it listens.
func serve(t *testing.T, cfg service.Config) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{done: make(chan error, 1), stop: cancel}
	ready := make(chan []string, 1)
	cfg.Ready = func(addrs []string) { ready <- addrs }
	if cfg.PluginDirs == nil {
		cfg.PluginDirs = []string{pluginDir}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, "serve")
	}
	go func() { s.done <- service.Run(ctx, cfg) }()
	select {
	case s.addrs = <-ready:
	case err := <-s.done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// shutdown ends the Run and checks it returned nil.
func (s *served) shutdown(t *testing.T) {
	t.Helper()
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	if err := <-s.done; err != nil {
		t.Errorf("run returned %v after its context ended", err)
	}
}

// The default listener is DATA/baton.sock, 0600, in a data dir made 0700;
// it needs no token; health and reflection answer on it; a second service
// on the same socket is refused; ending the context drains (subscriptions
// end Unavailable) and removes the socket; a stale socket is replaced.
func TestRunUnixSocket(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data})
	sock := filepath.Join(data, service.SocketName)
	if d := cmp.Diff([]string{"unix://" + sock}, s.addrs); d != "" {
		t.Errorf("addrs (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{data, os.ModeDir | 0o700}, {sock, os.ModeSocket | 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.want)
		}
	}
	conn := dialUnix(t, sock)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := batonv1.NewBatonClient(conn)
	if _, err := client.CreateThread(ctx, &batonv1.CreateThreadRequest{ThreadId: "t1", Provider: "acp", Cwd: t.TempDir()}); err != nil {
		t.Fatalf("create over the socket: %v", err)
	}
	checkHealth(ctx, t, conn, healthpb.HealthCheckResponse_SERVING)
	if got := listServices(ctx, t, conn); !slices.Contains(got, service.Service) || !slices.Contains(got, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v; want baton.v1.Baton and grpc.health.v1.Health", got)
	}

	err := service.Run(ctx, service.Config{DataDir: data, PluginDirs: []string{pluginDir}})
	if err == nil || !strings.Contains(err.Error(), "a service already answers") || !strings.Contains(err.Error(), sock) {
		t.Errorf("a second service on the socket: %v; want it refused", err)
	}

	stream, err := client.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	s.shutdown(t)
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "service shutting down") {
		t.Errorf("subscription at drain: %v, want Unavailable, service shutting down", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket after the drain: %v, want it gone", err)
	}

	// A stale socket (its service died) is replaced.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	s = serve(t, service.Config{DataDir: data})
	if _, err := client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: "t1"}); err != nil {
		t.Errorf("get over the replaced socket: %v", err)
	}
}

// A data dir others may reach, or a socket dir others may write, is
// refused, naming it and its mode, before anything listens.
func TestRunRefusesWritableDirs(t *testing.T) {
	base := shortDir(t)
	data := filepath.Join(base, "data")
	socks := filepath.Join(base, "socks")
	for _, d := range []string{data, socks} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir    string
		mode   os.FileMode
		listen []string
		want   string
	}{
		{data, 0o770, nil, "data dir " + data + " is readable, writable and searchable by its group (mode 0770); refusing to serve from it: chmod 700 " + data},
		{data, 0o702, nil, "data dir " + data + " is writable by others (mode 0702); refusing to serve from it: chmod 700 " + data},
		{data, 0o755, nil, "data dir " + data + " is readable and searchable by its group and others (mode 0755); refusing to serve from it: chmod 700 " + data},
		{data, 0o740, nil, "data dir " + data + " is readable by its group (mode 0740); refusing to serve from it: chmod 700 " + data},
		{socks, 0o777, []string{"unix://" + filepath.Join(socks, "b.sock")}, "socket dir " + socks + " is writable by group and others (mode 0777)"},
	} {
		if err := os.Chmod(tc.dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		err := service.Run(ctx, service.Config{DataDir: data, Listen: tc.listen, PluginDirs: []string{pluginDir},
			Ready: func([]string) { t.Errorf("%s: the service listened", tc.want); cancel() }})
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run: %v; want %q", err, tc.want)
		}
		if err := os.Chmod(tc.dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "events")); !os.IsNotExist(err) {
		t.Errorf("the host opened on a refused data dir: %v", err)
	}
}

// TCP always needs the token: none or a wrong one is Unauthenticated
// (logged without the token), the right one (made 0600 in the data dir on
// first use, or read from a token file) works. Health alone answers
// without it; reflection, like every other call, needs it.
func TestRunTCPToken(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	var logs syncBuffer
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	if len(s.addrs) != 2 || !strings.HasPrefix(s.addrs[1], "tcp://127.0.0.1:") {
		t.Fatalf("addrs %v; want the socket and TCP", s.addrs)
	}
	fi, err := os.Stat(filepath.Join(data, service.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode())
	}
	b, err := os.ReadFile(filepath.Join(data, service.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	conn := dialTCP(t, strings.TrimPrefix(s.addrs[1], "tcp://"), insecure.NewCredentials())
	client := batonv1.NewBatonClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const wrong = "not-the-token-1234"
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no token", ctx, codes.Unauthenticated},
		{"wrong token", metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+wrong), codes.Unauthenticated},
		{"not bearer", metadata.AppendToOutgoingContext(ctx, "authorization", token), codes.Unauthenticated},
		{"the token", metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), codes.OK},
	} {
		_, err := client.ListThreads(tc.ctx, &batonv1.ListThreadsRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("%s: list: %v, want %s", tc.name, err, tc.want)
		}
		stream, err := client.Subscribe(tc.ctx, &batonv1.SubscribeRequest{ThreadId: "nope"})
		if err == nil {
			_, err = stream.Recv()
		}
		want := tc.want
		if want == codes.OK {
			want = codes.NotFound // in, and told the thread is not there
		}
		if status.Code(err) != want {
			t.Errorf("%s: subscribe: %v, want %s", tc.name, err, want)
		}
		if _, err := client.GetStatus(tc.ctx, &batonv1.GetStatusRequest{}); status.Code(err) != tc.want {
			t.Errorf("%s: status: %v, want %s", tc.name, err, tc.want)
		}
		refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(tc.ctx)
		if err == nil {
			// A stream the server has ended makes Send say io.EOF; its
			// status is Recv's.
			if err = refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err == nil || err == io.EOF {
				_, err = refl.Recv()
			}
		}
		if status.Code(err) != tc.want {
			t.Errorf("%s: reflection: %v, want %s", tc.name, err, tc.want)
		}
		for _, svc := range []string{"", service.Service} {
			resp, err := healthpb.NewHealthClient(conn).Check(tc.ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("%s: health of %q: %v %v, want SERVING whatever the token", tc.name, svc, resp, err)
			}
		}
	}
	s.shutdown(t)
	out := logs.String()
	if !strings.Contains(out, "wrong token") || !strings.Contains(out, "no authorization metadata") {
		t.Errorf("the log does not say why calls were refused:\n%s", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, wrong) {
		t.Errorf("the log holds a token:\n%s", out)
	}

	// A token file of the caller's.
	file := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(file, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}, TokenFile: file})
	client = batonv1.NewBatonClient(dialTCP(t, strings.TrimPrefix(s.addrs[1], "tcp://"), insecure.NewCredentials()))
	if _, err := client.ListThreads(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer from-a-file"), &batonv1.ListThreadsRequest{}); err != nil {
		t.Errorf("with the file's token: %v", err)
	}
	if _, err := client.ListThreads(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), &batonv1.ListThreadsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("with the data dir's token, when a file is named: %v, want Unauthenticated", err)
	}
}

// A TCP address other than loopback without TLS is refused before
// anything listens or opens.
func TestRunNonLoopbackNeedsTLS(t *testing.T) {
	for _, addr := range []string{"tcp://0.0.0.0:0", "tcp://:0", "tcp://192.0.2.1:0"} {
		data := filepath.Join(shortDir(t), "data")
		ctx, cancel := context.WithCancel(t.Context())
		err := service.Run(ctx, service.Config{DataDir: data, Listen: []string{addr}, PluginDirs: []string{pluginDir},
			Ready: func([]string) { t.Errorf("%s: the service listened", addr); cancel() }})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "needs TLS") {
			t.Errorf("%s: %v; want it refused for want of TLS", addr, err)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("%s: the data dir was made before the refusal", addr)
		}
	}
}

// A configuration the service cannot serve as written is a ConfigError
// (the CLI's usage error) that says what to give instead, refused before
// anything is made: an address it cannot parse, a unix socket's path over
// what the system holds (given, or the data dir's), half a TLS pair,
// plaintext off loopback.
func TestRunConfigErrors(t *testing.T) {
	long := filepath.Join(shortDir(t), strings.Repeat("d", service.MaxSocketPath))
	limit := fmt.Sprintf("a unix socket's path holds at most %d bytes here", service.MaxSocketPath)
	for _, tc := range []struct {
		name    string
		data    string // "" for a short one
		listen  []string
		tlsCert string
		want    string
	}{
		{"not an address", "", []string{"localhost:7077"}, "", `serve: listen "localhost:7077": want unix:///PATH or tcp://HOST:PORT`},
		{"no port", "", []string{"tcp://127.0.0.1"}, "", `serve: listen "tcp://127.0.0.1": want tcp://HOST:PORT`},
		{"relative socket", "", []string{"unix://baton.sock"}, "", `serve: listen "unix://baton.sock": a unix socket's path must be absolute`},
		{"long socket", "", []string{"unix://" + long + "/baton.sock"}, "",
			fmt.Sprintf(`serve: listen "unix://%s/baton.sock": the socket path %s/baton.sock is %d bytes; %s: give --listen unix:///A/SHORTER/PATH`,
				long, long, len(long)+len("/baton.sock"), limit)},
		{"long data dir", long, nil, "",
			fmt.Sprintf(`serve: the socket path %s/baton.sock is %d bytes; %s: give --listen unix:///A/SHORTER/PATH (the service then has no socket in the data dir: reach it with --server), or a shorter --data`,
				long, len(long)+len("/baton.sock"), limit)},
		{"half a TLS pair", "", nil, "cert.pem", "serve: TLS needs both a certificate and its key"},
		{"plaintext off loopback", "", []string{"tcp://192.0.2.1:0"}, "", "serve: listen tcp://192.0.2.1:0: an address other than loopback needs TLS (a certificate and key)"},
	} {
		data := tc.data
		if data == "" {
			data = filepath.Join(shortDir(t), "data")
		}
		ctx, cancel := context.WithCancel(t.Context())
		err := service.Run(ctx, service.Config{DataDir: data, Listen: tc.listen, TLSCert: tc.tlsCert, PluginDirs: []string{pluginDir},
			Ready: func([]string) { t.Errorf("%s: the service listened", tc.name); cancel() }})
		cancel()
		var ce *service.ConfigError
		if !errors.As(err, &ce) || err.Error() != tc.want {
			t.Errorf("%s: %v (a ConfigError: %v)\nwant %s", tc.name, err, ce != nil, tc.want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("%s: the data dir was made before the refusal", tc.name)
		}
	}
	// A client's too: a socket path the system cannot dial.
	_, err := service.Dial(t.Context(), long+"/baton.sock", service.DialOptions{})
	var ce *service.ConfigError
	if want := fmt.Sprintf(`server %q: the socket path %s/baton.sock is %d bytes; %s`, long+"/baton.sock", long, len(long)+len("/baton.sock"), limit); !errors.As(err, &ce) || err.Error() != want {
		t.Errorf("Dial of a long socket path: %v\nwant %s", err, want)
	}
}

// With a certificate, TCP is TLS (any address): a client that trusts the
// certificate and sends the token gets in; one that speaks plain TCP does
// not.
func TestRunTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://0.0.0.0:0"}, TLSCert: certFile, TLSKey: keyFile})
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.addrs[1], "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, service.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(b)))
	addr := net.JoinHostPort("127.0.0.1", port)
	tlsClient := batonv1.NewBatonClient(dialTCP(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if _, err := tlsClient.ListThreads(ctx, &batonv1.ListThreadsRequest{}); err != nil {
		t.Errorf("over TLS: %v", err)
	}
	plain := batonv1.NewBatonClient(dialTCP(t, addr, insecure.NewCredentials()))
	if _, err := plain.ListThreads(ctx, &batonv1.ListThreadsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plain TCP to a TLS listener: %v, want Unavailable", err)
	}
}

func dialTCP(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func checkHealth(ctx context.Context, t *testing.T, conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", service.Service} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("health of %q: %v %v, want %s", svc, resp, err, want)
		}
	}
}

// listServices asks server reflection for the services.
func listServices(ctx context.Context, t *testing.T, conn *grpc.ClientConn) []string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// syncBuffer is a buffer a logger writes from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
