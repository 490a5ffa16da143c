package service

import (
	"context"
	"net"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// CreateLoginCode makes a one-time code that signs a browser in (see
// session.go), with the URL of each TCP listener that opens it.
func (s *Server) CreateLoginCode(ctx context.Context, req *batonv1.CreateLoginCodeRequest) (*batonv1.LoginCode, error) {
	if fromBrowser(ctx) {
		return nil, status.Error(codes.PermissionDenied, "a browser's session cannot make sign-in codes: run `baton ui` where the service runs")
	}
	var bases []string
	for _, l := range s.listeners {
		if base := webBase(l); base != "" {
			bases = append(bases, base)
		}
	}
	if s.sessions == nil || len(bases) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "the service has no TCP listener a browser can reach: "+
			"start it with --listen tcp://127.0.0.1:7077 (beside its socket), then run baton ui again")
	}
	if id := req.GetThreadId(); id != "" {
		if _, err := s.host.ThreadSequence(id); err != nil {
			return nil, s.toStatus("CreateLoginCode", err)
		}
	}
	code, expires := s.sessions.newCode(req.GetThreadId())
	q := url.Values{"code": {code}}.Encode()
	resp := &batonv1.LoginCode{ExpiresAt: timestamppb.New(expires)}
	for _, b := range bases {
		resp.Urls = append(resp.Urls, b+"/login?"+q)
	}
	resp.Url = resp.Urls[0]
	s.log.Info("a sign-in code was made", "expires", expires)
	return resp, nil
}

// fromBrowser says whether a call came through a browser's session.
func fromBrowser(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(strings.ToLower(browserHeader))) > 0
}

// webBase is the address a browser opens a TCP listener at
// (http://127.0.0.1:7077), or "" for a unix socket. A listener on every
// address is opened on loopback.
func webBase(l *batonv1.Listener) string {
	hp, ok := strings.CutPrefix(l.GetAddress(), "tcp://")
	if !ok {
		return ""
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if l.GetTls() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
