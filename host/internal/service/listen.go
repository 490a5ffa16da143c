package service

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Listeners. The service listens on a unix socket, DATA/baton.sock unless
// Config.Listen names unix sockets of its own, and on each TCP address
// Config.Listen names. A unix socket is made 0600 in a directory that only
// its owner may write; a stale one (nothing answers it) is replaced, a
// live one refused.

// SocketName is the default socket's name in the data dir.
const SocketName = "baton.sock"

// ConfigError is a configuration the service refuses as it is given,
// before it touches anything: an address it cannot listen on or dial as
// written, half a TLS pair, plaintext TCP off loopback. Its message says
// what to give instead; the CLI makes it a usage error (exit 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// configErrorf is a ConfigError.
func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// MaxSocketPath is the longest path a unix socket can have on this
// system: its address holds the path and a terminating NUL (107 bytes on
// Linux, 103 on macOS). A longer one cannot be listened on or dialed.
var MaxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// socketTooLong says why path is too long for a unix socket ("" when it
// is not): what the path and the limit are.
func socketTooLong(path string) string {
	if len(path) <= MaxSocketPath {
		return ""
	}
	return fmt.Sprintf("the socket path %s is %d bytes; a unix socket's path holds at most %d bytes here", path, len(path), MaxSocketPath)
}

// endpoint is one address to listen on.
type endpoint struct {
	network string // "unix" or "tcp"
	addr    string // a socket path, or host:port
}

func (e endpoint) String() string { return e.network + "://" + e.addr }

// parseListen reads Config.Listen: unix:///PATH or tcp://HOST:PORT. With no
// unix socket among them, the data dir's socket is added.
func parseListen(dataDir string, listen []string) ([]endpoint, error) {
	var eps []endpoint
	unix := false
	for _, a := range listen {
		switch {
		case strings.HasPrefix(a, "unix://"):
			p := strings.TrimPrefix(a, "unix://")
			if !filepath.IsAbs(p) {
				return nil, configErrorf("listen %q: a unix socket's path must be absolute", a)
			}
			p = filepath.Clean(p)
			if why := socketTooLong(p); why != "" {
				return nil, configErrorf("listen %q: %s: give --listen unix:///A/SHORTER/PATH", a, why)
			}
			eps = append(eps, endpoint{"unix", p})
			unix = true
		case strings.HasPrefix(a, "tcp://"):
			hp := strings.TrimPrefix(a, "tcp://")
			if _, _, err := net.SplitHostPort(hp); err != nil {
				return nil, configErrorf("listen %q: want tcp://HOST:PORT", a)
			}
			eps = append(eps, endpoint{"tcp", hp})
		default:
			return nil, configErrorf("listen %q: want unix:///PATH or tcp://HOST:PORT", a)
		}
	}
	if !unix {
		p := filepath.Join(dataDir, SocketName)
		if why := socketTooLong(p); why != "" {
			return nil, configErrorf("%s: give --listen unix:///A/SHORTER/PATH (the service then has no socket in the data dir: reach it with --server), or a shorter --data", why)
		}
		eps = append([]endpoint{{"unix", p}}, eps...)
	}
	return eps, nil
}

// checkDir refuses a directory that others than its owner may write.
func checkDir(what, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		who := "group and others"
		switch m & 0o022 {
		case 0o020:
			who = "its group"
		case 0o002:
			who = "others"
		}
		return fmt.Errorf("%s %s is writable by %s (mode %04o); refusing to serve from it: chmod go-w %s", what, dir, who, m, dir)
	}
	return nil
}

// clearSocket removes a stale socket at path; a socket a service answers
// on, or a file that is not a socket, is refused.
func clearSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("socket %s: a file that is not a socket is in the way", path)
	}
	d := net.Dialer{Timeout: time.Second}
	if c, err := d.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("socket %s: a service already answers there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// listen opens an endpoint's listener: a unix socket made 0600, or TCP
// (whose TLS, if any, split does), its connections counted by conns (a
// TLS handshake that never ends holds one too).
func listen(ep endpoint, conns *connLimit) (net.Listener, error) {
	l, err := net.Listen(ep.network, ep.addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", ep, err)
	}
	if ep.network == "unix" {
		// The directory is its owner's alone, so the moment before the
		// chmod lets no one else in.
		if err := os.Chmod(ep.addr, 0o600); err != nil {
			l.Close()
			return nil, fmt.Errorf("listen %s: %w", ep, err)
		}
	}
	return &limitedListener{Listener: l, limit: conns, ep: ep}, nil
}

// connLimit bounds the connections the service holds open, over all its
// listeners. A connection over the bound is closed as it is accepted
// (its client's call fails Unavailable at once, where a listener that
// stopped accepting would leave it waiting with no word), and the log
// says so once each time the bound is reached.
type connLimit struct {
	slots chan struct{} // one per open connection
	log   hclog.Logger
	full  atomic.Bool // the log said the bound was reached, and no connection has ended since
}

func newConnLimit(max int, log hclog.Logger) *connLimit {
	return &connLimit{slots: make(chan struct{}, max), log: log}
}

// limitedListener is a listener whose connections connLimit counts.
type limitedListener struct {
	net.Listener
	limit *connLimit
	ep    endpoint
}

// Accept returns the next connection under the bound, closing those over
// it.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.limit.slots <- struct{}{}:
			return &limitedConn{Conn: c, limit: l.limit}, nil
		default:
		}
		c.Close()
		if l.limit.full.CompareAndSwap(false, true) {
			l.limit.log.Warn("connection refused: the service holds as many connections as it may; refusing more until one closes (baton serve --max-connections)",
				"open", cap(l.limit.slots), "listener", l.ep.String())
		} else {
			l.limit.log.Debug("connection refused: too many open", "open", cap(l.limit.slots), "listener", l.ep.String())
		}
	}
}

// limitedConn gives its slot back when it is closed.
type limitedConn struct {
	net.Conn
	limit *connLimit
	once  sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.limit.slots
		c.limit.full.Store(false)
	})
	return err
}

// addrOf is a listener's address as Ready reports it: unix:///PATH or
// tcp://HOST:PORT (the port it got).
func addrOf(ep endpoint, l net.Listener) string {
	if ep.network == "unix" {
		return ep.String()
	}
	return "tcp://" + l.Addr().String()
}
