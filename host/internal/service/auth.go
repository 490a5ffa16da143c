package service

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authentication. A unix socket is guarded by its mode (0600, in a
// directory only its owner can write): it needs no token. Every call that
// comes in over TCP carries the service's bearer token in its metadata,
// "authorization: Bearer TOKEN"; a missing or wrong one is Unauthenticated,
// and the log says which without the token. Health alone answers without
// it (healthMethods).

// TokenFileName is the token's file in the data dir, made on first use.
const TokenFileName = "token"

// loadToken reads the token from file, or, with no file named, from the
// data dir's token file, which it makes (0600) when there is none.
func loadToken(dataDir, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", file)
		}
		return tok, nil
	}
	path := filepath.Join(dataDir, TokenFileName)
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
		return "", fmt.Errorf("token file %s is empty; remove it to have a new token made", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	tok := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// authenticator checks the token of calls that came in over TCP.
type authenticator struct {
	token string
	log   hclog.Logger
}

// healthMethods is the prefix of gRPC health's methods, which answer
// without the token: health says only whether the service serves, which a
// probe (systemd, a load balancer) asks with no secret, and which tells a
// client that finds no service from one whose token is refused.
const healthMethods = "/grpc.health.v1.Health/"

// check passes a call over a unix socket, a health call, and a call over
// TCP whose metadata carries the token.
func (a *authenticator) check(ctx context.Context, method string) error {
	p, ok := peer.FromContext(ctx)
	if ok && p.LocalAddr != nil && p.LocalAddr.Network() == "unix" {
		return nil
	}
	if strings.HasPrefix(method, healthMethods) {
		return nil
	}
	reason := "no authorization metadata"
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if vals := md.Get("authorization"); len(vals) > 0 {
			tok, bearer := strings.CutPrefix(vals[0], "Bearer ")
			switch {
			case !bearer:
				reason = "authorization is not a bearer token"
			case a.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.token)) == 1:
				return nil
			default:
				reason = "wrong token"
			}
		}
	}
	var from string
	if ok && p.Addr != nil {
		from = p.Addr.String()
	}
	a.log.Warn("unauthenticated call refused", "method", method, "peer", from, "reason", reason)
	return status.Error(codes.Unauthenticated, "a call over TCP needs the service's token: authorization: Bearer TOKEN ("+reason+")")
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// isLoopback says whether a TCP listen host is a loopback address only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
