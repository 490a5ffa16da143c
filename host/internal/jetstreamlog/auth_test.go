package jetstreamlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
)

// refusedWithin bounds an Open the servers refuse: it must fail at once,
// so a bound it reaches is a hang (or a retry for ever), reported as such.
const refusedWithin = 30 * time.Second

// secretFile writes a secret to a mode 0600 file, as a host is given one.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openAuth opens a log on c with the connection options of o (URLs, Host
// and Dir filled in).
func openAuth(ctx context.Context, t *testing.T, c *natstest.Cluster, o Options) (*Log, error) {
	t.Helper()
	o.URLs, o.Host, o.Dir = []string{c.URLs()}, "h1", t.TempDir()
	l, err := Open(ctx, o)
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return l, err
}

// openRefused opens a log on c, which is up, with o's files, and checks
// that Open failed without waiting for the servers as if they were down.
func openRefused(t *testing.T, c *natstest.Cluster, o Options) error {
	t.Helper()
	waited := make(chan struct{})
	o.Logger = hclog.New(&hclog.LoggerOptions{Output: saying{"cannot reach the servers", waited, &sync.Once{}}})
	ctx, cancel := context.WithTimeout(t.Context(), refusedWithin)
	defer cancel()
	_, err := openAuth(ctx, t, c, o)
	select {
	case <-waited:
		t.Errorf("Open waited for servers that were up and refused it (it failed with %v)", err)
	default:
	}
	return err
}

// roundTrip appends an event and reads the log back: the connection the
// options made reaches JetStream, not only the server.
func roundTrip(t *testing.T, l *Log) {
	t.Helper()
	recs := appendOne(t, l, "t1", 0)
	if diff := cmp.Diff(recs, all(t, l)); diff != "" {
		t.Fatalf("the log read back is not what was appended (-appended +read):\n%s", diff)
	}
}

// wantRefused checks that an Open the servers refused failed at once
// saying why, in words a user finds the cause in.
func wantRefused(t *testing.T, err error, words string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("Open succeeded; want it refused (%s)", words)
	case !errors.Is(err, ErrRefused):
		t.Fatalf("Open failed with %q; want the servers' refusal (%s), at once", err, words)
	case !strings.Contains(err.Error(), words):
		t.Fatalf("Open failed with %q; want it to say %q", err, words)
	}
}

func TestOpenWithTheServersToken(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	l, err := openAuth(t.Context(), t, c, Options{TokenFile: secretFile(t, "  s3cret\n")})
	if err != nil {
		t.Fatalf("open with the servers' token (white space around it): %v", err)
	}
	roundTrip(t, l)
}

func TestOpenWithoutTheServersTokenFailsSayingAuthorization(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"wrong token", Options{TokenFile: secretFile(t, "guess")}},
		{"no token", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := openRefused(t, c, tc.o)
			wantRefused(t, err, "authorization failed")
			if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("Open failed with %q; want the server's words (authorization violation) in it", err)
			}
		})
	}
}

func TestOpenOverTLSWithAClientCertificate(t *testing.T) {
	f := natstest.NewTLSFiles(t)
	c := natstest.SingleWith(t, f.RequireClientCerts(t))
	l, err := openAuth(t.Context(), t, c, Options{TLS: TLS{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}})
	if err != nil {
		t.Fatalf("open over TLS with the CA and a client certificate: %v", err)
	}
	roundTrip(t, l)
}

func TestOpenOverTLSFailsSayingTLS(t *testing.T) {
	f := natstest.NewTLSFiles(t)
	other := natstest.NewTLSFiles(t) // a CA that did not sign the server's certificate
	c := natstest.SingleWith(t, f.RequireClientCerts(t))
	for _, tc := range []struct {
		name string
		tls  TLS
	}{
		{"no client certificate", TLS{CAFile: f.CA}},
		{"another CA", TLS{CAFile: other.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}},
		{"no TLS", TLS{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, openRefused(t, c, Options{TLS: tc.tls}), "TLS failed")
		})
	}
}

func TestOpenWithCredentials(t *testing.T) {
	op := natstest.NewOperator(t)
	c := natstest.SingleWith(t, op.Options(t))
	l, err := openAuth(t.Context(), t, c, Options{CredsFile: op.Creds})
	if err != nil {
		t.Fatalf("open with the operator's user's credentials: %v", err)
	}
	roundTrip(t, l)

	wantRefused(t, openRefused(t, c, Options{CredsFile: op.Other}), "authorization failed")
}

func TestOpenSaysWhichFileIsWrong(t *testing.T) {
	f := natstest.NewTLSFiles(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name  string
		o     Options
		words string
	}{
		{"token file missing", Options{TokenFile: missing}, "read the NATS token: open " + missing},
		{"token file empty", Options{TokenFile: secretFile(t, " \n")}, "is empty"},
		{"creds not creds", Options{CredsFile: secretFile(t, "not creds")}, "holds no nkey seed"},
		{"creds without a JWT", Options{CredsFile: seedOnly(t)}, "holds no user JWT"},
		{"CA not PEM", Options{TLS: TLS{CAFile: secretFile(t, "not pem")}}, "holds no PEM certificate"},
		{"key not the certificate's", Options{TLS: TLS{CertFile: f.ClientCert, KeyFile: f.ServerKey}},
			"load the NATS TLS client certificate " + f.ClientCert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No server: the files are checked before connecting.
			_, err := Open(t.Context(), Options{URLs: []string{"nats://127.0.0.1:1"}, Host: "h1", Dir: t.TempDir(),
				CredsFile: tc.o.CredsFile, TokenFile: tc.o.TokenFile, TLS: tc.o.TLS})
			if err == nil || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("Open with a bad file: got %v, want an error saying %q", err, tc.words)
			}
		})
	}
}

// A host that starts before its servers waits for them; once they are up
// and refuse it, Open fails saying why, rather than wait on as if they
// were still down.
func TestOpenWaitingForServersFailsWhenTheyRefuseIt(t *testing.T) {
	f := natstest.NewTLSFiles(t)
	for _, tc := range []struct {
		name   string
		server func(*server.Options)
		o      Options
		words  string
	}{
		{"wrong token", natstest.Token("s3cret"), Options{TokenFile: secretFile(t, "guess")}, "authorization failed"},
		{"no client certificate", f.RequireClientCerts(t), Options{TLS: TLS{CAFile: f.CA}}, "TLS failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := natstest.SingleWith(t, tc.server)
			c.Stop(0) // down when the host starts: it waits for them
			waiting := make(chan struct{})
			tc.o.Logger = hclog.New(&hclog.LoggerOptions{Output: saying{"cannot reach the servers", waiting, &sync.Once{}}})
			opened := make(chan error, 1)
			ctx, cancel := context.WithTimeout(t.Context(), refusedWithin)
			defer cancel()
			go func() {
				_, err := openAuth(ctx, t, c, tc.o)
				opened <- err
			}()
			select {
			case <-waiting:
			case err := <-opened:
				t.Fatalf("Open returned %v before the servers were up; want it to wait for them", err)
			}
			c.Start(0)
			wantRefused(t, <-opened, tc.words)
		})
	}
}

func TestOpenWaitsForServersDownAtFirst(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	c.Stop(0)
	waiting := make(chan struct{})
	o := Options{TokenFile: secretFile(t, "s3cret"),
		Logger: hclog.New(&hclog.LoggerOptions{Output: saying{"cannot reach the servers", waiting, &sync.Once{}}})}
	type opened struct {
		l   *Log
		err error
	}
	done := make(chan opened, 1)
	go func() {
		l, err := openAuth(t.Context(), t, c, o)
		done <- opened{l, err}
	}()
	select {
	case <-waiting:
	case r := <-done:
		t.Fatalf("Open returned (%v) before the servers were up; want it to wait for them", r.err)
	}
	c.Start(0)
	r := <-done
	if r.err != nil {
		t.Fatalf("Open once the servers are up: %v", r.err)
	}
	roundTrip(t, r.l)
}

// saying is a log output that closes a channel the first time a line
// holds some words.
type saying struct {
	words string
	said  chan struct{}
	once  *sync.Once
}

func (s saying) Write(p []byte) (int, error) {
	if strings.Contains(string(p), s.words) {
		s.once.Do(func() { close(s.said) })
	}
	return len(p), nil
}

// seedOnly writes a credentials file with a user's nkey seed and no JWT.
func seedOnly(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	return secretFile(t, "-----BEGIN USER NKEY SEED-----\n"+string(seed)+"\n------END USER NKEY SEED------\n")
}

// What a first connection's error is: a refusal fails a host at once, any
// other error is servers it waits for.
func TestRefusal(t *testing.T) {
	alert := &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}
	for _, tc := range []struct {
		name string
		err  error
		want string // the refusal's words, "" for none
	}{
		{"authorization error", nats.ErrAuthorization, "authorization failed"},
		{"authentication expired", nats.ErrAuthExpired, "authorization failed"},
		{"TLS handshake", fmt.Errorf("%w: x509: certificate signed by unknown authority", nats.ErrTLS), "TLS failed"},
		{"TLS alert after the handshake", alert, "TLS failed"},
		{"TLS required", nats.ErrSecureConnRequired, "TLS failed"},
		{"no servers", nats.ErrNoServers, ""},
		{"dial", &net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}, ""},
		{"read", &net.OpError{Op: "read", Err: io.EOF}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if r := refusal(tc.err); r != nil {
				if !errors.Is(r, ErrRefused) || !errors.Is(r, tc.err) {
					t.Fatalf("refusal(%v) = %v: want it to wrap ErrRefused and the error", tc.err, r)
				}
				got = r.Error()
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("refusal(%v) = %q, want one saying %q", tc.err, got, tc.want)
			}
		})
	}
}

// A log whose servers stop taking its token (replaced on the servers) is
// disconnected and refused as it reconnects; the client library then
// closes its connection for good, and the log fails saying why: a write
// waiting on the connection when it closed fails, as does one after,
// rather than wait on a connection that never comes back.
func TestALogWhoseTokenTheServersNoLongerTakeFails(t *testing.T) {
	c := natstest.SingleWith(t, natstest.Token("s3cret"))
	lost := make(chan struct{})
	l, err := openAuth(t.Context(), t, c, Options{TokenFile: secretFile(t, "s3cret"),
		Logger: hclog.New(&hclog.LoggerOptions{Output: saying{"lost the connection", lost, &sync.Once{}}})})
	if err != nil {
		t.Fatal(err)
	}
	appendOne(t, l, "t1", 0)
	c.Reload(0, natstest.Token("replaced"))
	appendAsync := func(i int) <-chan error {
		appended := make(chan error, 1)
		go func() {
			_, _, err := l.Append(eventlog.Batch{Events: []eventlog.Pending{event("t1", i)}})
			appended <- err
		}()
		return appended
	}
	<-lost // the servers dropped the client; it is refused as it reconnects
	waiting := appendAsync(1)
	select {
	case <-l.Failed():
	case <-time.After(refusedWithin):
		t.Fatal("the log did not fail when the servers refused its token")
	}
	if err := l.Failure(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "authorization failed") {
		t.Fatalf("the log failed with %v; want the servers' refusal, saying authorization failed", err)
	}
	for name, appended := range map[string]<-chan error{"waiting when the log failed": waiting, "after": appendAsync(2)} {
		select {
		case err := <-appended:
			if !errors.Is(err, ErrRefused) {
				t.Errorf("an append %s: %v; want the servers' refusal", name, err)
			}
		case <-time.After(refusedWithin):
			t.Errorf("an append %s still waits", name)
		}
	}
}
