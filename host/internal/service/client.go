package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// maxMessage bounds a message a client receives: a long thread's
// projection is large.
const maxMessage = 256 << 20

// maxRequest bounds a request the service takes, and a client sends: a
// user message of up to domain.MaxMessageBytes, with room for the
// request's other fields (ids, a policy), which are small beside it. So a
// message over the limit reaches SendMessage, which refuses it naming the
// limit; only a request far over it meets gRPC's own bound. Every server
// (Run's listeners, InProcess) and every client (Dial, InProcess) has it.
const maxRequest = domain.MaxMessageBytes + 1<<20

// DialOptions say how a client reaches a service.
type DialOptions struct {
	// TokenFile holds the bearer token sent with every call (required by
	// a service's TCP listeners).
	TokenFile string
	// TLS speaks TLS to a TCP address (implied by CAFile).
	TLS bool
	// CAFile holds the PEM certificates that verify the service (default:
	// the system's roots).
	CAFile string
}

// Dial returns a client connection to a service at target: unix:///path,
// a bare path to a unix socket, or tcp://host:port. Plaintext TCP is
// allowed only to a loopback address. The connection is lazy: Check says
// whether a service answers.
func Dial(ctx context.Context, target string, opts DialOptions) (*grpc.ClientConn, error) {
	addr, tcp, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	dopts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxRequest))}
	secure := opts.TLS || opts.CAFile != ""
	switch {
	case secure && !tcp:
		return nil, configErrorf("server %s: TLS is for tcp:// addresses, not unix sockets", target)
	case secure:
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if opts.CAFile != "" {
			pem, err := os.ReadFile(opts.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read CA file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", opts.CAFile)
			}
		}
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	case tcp && !loopback(addr):
		return nil, configErrorf("server %s is not a loopback address: pass --tls (and --ca-file) to reach it", target)
	default:
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if opts.TokenFile != "" {
		b, err := os.ReadFile(opts.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("read token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("token file %s is empty", opts.TokenFile)
		}
		dopts = append(dopts, grpc.WithPerRPCCredentials(bearer{token: tok, secure: secure}))
	}
	grpcTarget := "unix://" + addr
	if tcp {
		grpcTarget = "passthrough:///" + addr
	}
	conn, err := grpc.NewClient(grpcTarget, dopts...)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", target, err)
	}
	return conn, nil
}

// parseTarget splits a target into a socket path or a host:port. What it
// refuses is a ConfigError.
func parseTarget(target string) (addr string, tcp bool, err error) {
	var p string
	switch {
	case strings.HasPrefix(target, "tcp://"):
		u, err := url.Parse(target)
		if err != nil || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return "", false, configErrorf("server %q: want tcp://HOST:PORT", target)
		}
		return u.Host, true, nil
	case strings.HasPrefix(target, "unix://"):
		p = strings.TrimPrefix(target, "unix://")
		if !filepath.IsAbs(p) {
			return "", false, configErrorf("server %q: want unix:///ABSOLUTE/PATH", target)
		}
	case strings.Contains(target, "://"):
		return "", false, configErrorf("server %q: want unix:///PATH, a socket path, or tcp://HOST:PORT", target)
	case target == "":
		return "", false, &ConfigError{Err: errors.New("no server address")}
	default:
		if p, err = filepath.Abs(target); err != nil {
			return "", false, fmt.Errorf("server %q: %w", target, err)
		}
	}
	if why := socketTooLong(p); why != "" {
		return "", false, configErrorf("server %q: %s", target, why)
	}
	return p, false, nil
}

// loopback says whether host:port names this machine only.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer sends "authorization: Bearer TOKEN" with every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false: plaintext reaches only a unix socket
// or a loopback address (Dial refuses the rest).
func (b bearer) RequireTransportSecurity() bool { return b.secure }

// ErrNotServing is a service whose health is not SERVING: one that is
// draining as it stops.
var ErrNotServing = errors.New("the service is not serving")

// Check says whether a service answers on conn: its health service
// reports SERVING before ctx ends (else ErrNotServing).
func Check(ctx context.Context, conn *grpc.ClientConn) error {
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%w: its health is %s", ErrNotServing, resp.GetStatus())
	}
	return nil
}

// ErrRefused is a service that answers but refuses the caller's token.
var ErrRefused = errors.New("refused: wrong or missing token")

// CheckToken says whether the service on conn takes the caller's token.
// Health answers without it, so a service that passes Check may still
// refuse every other call: a client over TCP asks once, with a call that
// needs the token (GetStatus), before it sends anything. A refusal is
// ErrRefused; a service that has no GetStatus (an older one) passes.
func CheckToken(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := batonv1.NewBatonClient(conn).GetStatus(ctx, &batonv1.GetStatusRequest{})
	switch status.Code(err) {
	case codes.OK, codes.Unimplemented:
		return nil
	case codes.Unauthenticated:
		return ErrRefused
	}
	return err
}

// InProcess serves h over an in-memory listener and returns a client
// connection to it: the embedded host answers through the very same
// Server as `baton serve`. stop closes the connection and the server (not
// the host).
func InProcess(h *orchestrator.Host, opts Options) (conn *grpc.ClientConn, stop func(), err error) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRequest))
	svc := New(h, opts)
	svc.Register(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(lis) // returns when srv stops
	}()
	conn, err = grpc.NewClient("passthrough:///baton.inprocess",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxRequest)))
	if err != nil {
		srv.Stop()
		<-served
		return nil, nil, fmt.Errorf("in-process client: %w", err)
	}
	return conn, func() {
		conn.Close()
		svc.Shutdown()
		srv.Stop()
		<-served
	}, nil
}
