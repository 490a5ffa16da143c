package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// What a node asks of its clients, for tests of a client's token, TLS
// files and credentials: each helper here makes the files a client is
// given and the server options (for SingleWith) that check them.

// Token makes a node ask its clients for token.
func Token(token string) func(*server.Options) {
	return func(o *server.Options) { o.Authorization = token }
}

// TLSFiles are PEM files, in a test's temporary directory, of a CA, a
// server certificate it signed for 127.0.0.1 (an IP SAN: clients dial
// that address), and a client certificate it signed.
type TLSFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewTLSFiles makes a CA and the certificates it signs (ECDSA P-256,
// valid for a day).
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := TLSFiles{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()
	caKey := newKey(t)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "baton test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, f.CA, "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP, certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		k, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "EC PRIVATE KEY", k)
	}
	leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, f.ServerCert, f.ServerKey)
	leaf(3, "baton test client", x509.ExtKeyUsageClientAuth, nil, f.ClientCert, f.ClientKey)
	return f
}

// RequireClientCerts makes a node serve TLS with the server certificate
// and take only clients that present a certificate the CA signed.
func (f TLSFiles) RequireClientCerts(t testing.TB) func(*server.Options) {
	t.Helper()
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.ServerCert, KeyFile: f.ServerKey, CaFile: f.CA, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig = true, true, cfg
		o.TLSTimeout = 10 // seconds: a loaded machine's handshake is not a failure
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Operator is a node's operator mode, as a .creds file is checked: an
// operator, a system account, one account with JetStream, and a user of
// it, whose JWT and nkey seed are in Creds (mode 0600).
type Operator struct {
	Creds string
	// Other is the credentials file of a user of an account the node
	// does not know: it refuses it.
	Other string

	operator *jwt.OperatorClaims
	system   string            // the system account's public key
	accounts map[string]string // public key: JWT, for the resolver
}

// NewOperator makes an operator, its accounts and a user, and their
// credentials files.
func NewOperator(t testing.TB) *Operator {
	t.Helper()
	dir := t.TempDir()
	op := &Operator{Creds: filepath.Join(dir, "user.creds"), Other: filepath.Join(dir, "other.creds"),
		accounts: map[string]string{}}
	okp := nkey(t, nkeys.CreateOperator)
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "baton-test"
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	if op.operator, err = jwt.DecodeOperatorClaims(ojwt); err != nil {
		t.Fatal(err)
	}
	account := func(name string, jetStream bool) nkeys.KeyPair {
		akp := nkey(t, nkeys.CreateAccount)
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		ac.Name = name
		if jetStream {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		op.accounts[apub] = ajwt
		return akp
	}
	skp := account("SYS", false)
	op.system, _ = skp.PublicKey()
	akp := account("BATON", true)
	writeCreds(t, op.Creds, akp)
	// A user of an account the node does not know (its resolver has no
	// JWT for it).
	writeCreds(t, op.Other, nkey(t, nkeys.CreateAccount))
	return op
}

// Options put a node in the operator's mode, its accounts preloaded in
// a memory resolver.
func (op *Operator) Options(t testing.TB) func(*server.Options) {
	t.Helper()
	return func(o *server.Options) {
		r := &server.MemAccResolver{}
		for pub, ajwt := range op.accounts {
			if err := r.Store(pub, ajwt); err != nil {
				t.Fatal(err)
			}
		}
		o.TrustedOperators = []*jwt.OperatorClaims{op.operator}
		o.SystemAccount = op.system
		o.AccountResolver = r
	}
}

// writeCreds writes the credentials of a new user of the account akp.
func writeCreds(t testing.TB, path string, akp nkeys.KeyPair) {
	t.Helper()
	ukp := nkey(t, nkeys.CreateUser)
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
}

func nkey(t testing.TB, create func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
