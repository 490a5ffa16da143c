package jetstreamlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Connecting: the log and the installation's lease (which connects on its
// own, with the same files) both connect through ConnectOptions and
// Connect, so that what a host's flags say reaches both alike, and both
// fail alike when the servers refuse it.

// ConnectOptions are the NATS options for o's credentials, token and TLS
// files (the other fields of o are not read). Each file is read now, so
// that one missing or malformed is an error naming it here rather than a
// failed connection later; the credentials and TLS files are read again
// at each connection, so that replacing them takes effect when the client
// reconnects.
func ConnectOptions(o Options) ([]nats.Option, error) {
	var opts []nats.Option
	if o.CredsFile != "" {
		if err := checkCreds(o.CredsFile); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TokenFile != "" {
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("read the NATS token: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("the NATS token file %s is empty", o.TokenFile)
		}
		opts = append(opts, nats.Token(token))
	}
	if o.TLS.CAFile != "" {
		pem, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the NATS TLS CA: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the NATS TLS CA file %s holds no PEM certificate", o.TLS.CAFile)
		}
		opts = append(opts, nats.RootCAs(o.TLS.CAFile))
	}
	if o.TLS.CertFile != "" || o.TLS.KeyFile != "" {
		if _, err := tls.LoadX509KeyPair(o.TLS.CertFile, o.TLS.KeyFile); err != nil {
			return nil, fmt.Errorf("load the NATS TLS client certificate %s and key %s: %w", o.TLS.CertFile, o.TLS.KeyFile, err)
		}
		opts = append(opts, nats.ClientCert(o.TLS.CertFile, o.TLS.KeyFile))
	}
	return opts, nil
}

// checkCreds checks that a credentials file holds a user JWT and an nkey
// seed, as nats.UserCredentials will read them.
func checkCreds(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the NATS credentials: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return fmt.Errorf("the NATS credentials file %s holds no nkey seed: %w", path, err)
	}
	kp.Wipe()
	j, err := nkeys.ParseDecoratedJWT(b)
	if err == nil {
		_, err = jwt.DecodeUserClaims(j)
	}
	if err != nil {
		return fmt.Errorf("the NATS credentials file %s holds no user JWT: %w", path, err)
	}
	return nil
}

// Connect connects to the servers at urls with opts (ConnectOptions' and
// the caller's own: name, handlers, reconnect wait), and once connected
// reconnects for ever, to whichever of them answers.
//
// Until one answers, Connect tries them all again, backing off, until ctx
// ends (saying once, to log, that it waits), so that a host may start
// before its servers. Servers that answer but refuse this client
// (authorization, or TLS) fail Connect at once, saying so (ErrRefused):
// retrying with the same token, credentials or certificates does not mend
// that, and a host that waited for ever would look like one waiting for
// its servers.
//
// The client library's own retry of a first connection
// (nats.RetryOnFailedConnect) is not used: it returns a connection at
// once and retries in the background, where a refusal (a TLS one for
// ever) looks to the caller like servers that do not answer.
func Connect(ctx context.Context, urls []string, log hclog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	url := strings.Join(urls, ",")
	opts = append(opts, nats.MaxReconnects(-1))
	if log == nil {
		log = hclog.NewNullLogger()
	}
	warned := false
	for attempt := 0; ; attempt++ {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			if warned {
				log.Info("connected to the servers", "servers", url)
			}
			return nc, nil
		}
		if r := refusal(err); r != nil {
			return nil, fmt.Errorf("connect to %s: %w", url, r)
		}
		if !warned {
			log.Warn("cannot reach the servers; trying again until they answer", "servers", url, "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w (%w)", url, err, context.Cause(ctx))
		case <-time.After(reconnectDelay(attempt)):
		}
	}
}

// ErrRefused is what a connection error wraps when servers answered but
// refused this client: its authorization (token, credentials) or its TLS.
var ErrRefused = errors.New("the servers refused this client")

// refusal says why servers refused a client (wrapping ErrRefused and err),
// or nil when err is not a refusal (servers down or unreachable).
func refusal(err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return fmt.Errorf("%w: authorization failed (the token or credentials are not the servers'): %w", ErrRefused, err)
	case errors.Is(err, nats.ErrTLS), errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted),
		tlsAlert(err):
		return fmt.Errorf("%w: TLS failed (check the CA, and the client certificate the servers may require): %w", ErrRefused, err)
	}
	return nil
}

// tlsAlert says whether err is a TLS alert the server sent, such as
// "certificate required". Under TLS 1.3 the client's handshake is done
// before the server has checked the client's certificate, so its refusal
// arrives as an alert on the first read after the handshake, which the
// client does not mark as a TLS error.
func tlsAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" // crypto/tls's Op for a received alert
}

// ClosedBy is why the servers closed a connection Connect made, when
// they refused the client (ErrRefused), else nil. The client library
// closes a connection whose reconnects the servers refuse twice alike
// (its token or credentials are no longer theirs): requests on it then
// fail with nats.ErrConnectionClosed, and this says why.
func ClosedBy(nc *nats.Conn) error {
	if !nc.IsClosed() {
		return nil
	}
	if r := refusal(nc.LastError()); r != nil {
		return fmt.Errorf("connect to %s: %w", strings.Join(nc.Servers(), ","), r)
	}
	return nil
}
