package service

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// One TCP listener, two servers. gRPC clients (the CLI, grpcurl, a
// program) and browsers (the dashboard: the Connect protocol over HTTP/1.1,
// or HTTP/2 under TLS) reach the service on the same TCP address. Each accepted
// connection is told apart by what it opens with and handed to the server
// that speaks it:
//
//   - plaintext: a connection that starts with HTTP/2's preface ("PRI ")
//     is gRPC's; anything else is HTTP/1.1, for the web server.
//   - TLS: a client whose hello offers only "h2" (gRPC's clients) gets h2
//     and the gRPC server; one that offers http/1.1 too (a browser, curl)
//     gets the web server, over h2 when it offers it (a browser's tabs then
//     share one connection, rather than each holding one of the six
//     HTTP/1.1 connections a browser opens to a host), else http/1.1.
//
// A connection that says nothing within splitTimeout is closed. Closing
// either side's listener closes the TCP listener and ends both.

// splitTimeout bounds how long a new connection may take to say which
// protocol it speaks (its TLS handshake, or its first bytes).
const splitTimeout = 10 * time.Second

// h2Preface is how every HTTP/2 connection starts; its first four bytes
// are enough, as no HTTP/1 method is PRI.
var h2Preface = []byte("PRI ")

// splitListener hands the connections of one listener to two servers.
type splitListener struct {
	l    net.Listener
	grpc *connQueue
	web  *connQueue

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup // the accept loop and the connections being told apart

	mu      sync.Mutex
	telling map[net.Conn]struct{} // connections being told apart, closed by close
}

// split starts telling l's connections apart; tlsConf is the listener's
// TLS (nil for plaintext), which split adapts so that ALPN tells.
func split(l net.Listener, tlsConf *tls.Config) (grpcLis, webLis net.Listener) {
	s := &splitListener{l: l, done: make(chan struct{}), telling: map[net.Conn]struct{}{}}
	s.grpc = &connQueue{s: s, c: make(chan net.Conn)}
	s.web = &connQueue{s: s, c: make(chan net.Conn)}
	s.wg.Add(1)
	go s.acceptLoop(tlsConf)
	return s.grpc, s.web
}

// splitTLS is the TLS config of one connection, on the listener's base:
// it chooses the protocols by the client's offer (only h2 for a gRPC
// client; h2 and http/1.1 for any client that offers http/1.1 too), and
// web says, once the handshake is done, which of the two it was.
func splitTLS(base *tls.Config) (conf *tls.Config, web *bool) {
	web = new(bool)
	conf = base.Clone()
	conf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if !slices.Contains(hello.SupportedProtos, "http/1.1") {
			return nil, nil // base: h2
		}
		*web = true
		wc := base.Clone()
		wc.NextProtos = []string{"h2", "http/1.1"}
		return wc, nil
	}
	return conf, web
}

func (s *splitListener) acceptLoop(tlsConf *tls.Config) {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			s.close()
			return
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.telling[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.route(c, tlsConf)
		}()
	}
}

// route tells c's protocol and hands it on, or closes it.
func (s *splitListener) route(raw net.Conn, tlsConf *tls.Config) {
	raw.SetDeadline(time.Now().Add(splitTimeout))
	web, c, err := classify(raw, tlsConf)
	s.mu.Lock()
	delete(s.telling, raw)
	s.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	raw.SetDeadline(time.Time{})
	q := s.grpc
	if web {
		q = s.web
	}
	select {
	case q.c <- c:
	case <-s.done:
		c.Close()
	}
}

// classify reads enough of c to say whether it is the web server's, and
// returns the connection to hand on (TLS over c, or c with what was read
// put back).
func classify(c net.Conn, tlsConf *tls.Config) (web bool, _ net.Conn, _ error) {
	if tlsConf != nil {
		conf, web := splitTLS(tlsConf)
		tc := tls.Server(c, conf)
		if err := tc.Handshake(); err != nil {
			return false, tc, err
		}
		return *web, tc, nil
	}
	head := make([]byte, len(h2Preface))
	n, err := io.ReadFull(c, head)
	if err != nil && !(errors.Is(err, io.ErrUnexpectedEOF) && n > 0) {
		return false, c, err
	}
	head = head[:n]
	return !bytes.Equal(head, h2Preface), &prefixedConn{Conn: c, head: head}, nil
}

func (s *splitListener) close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done)
		for c := range s.telling {
			c.Close()
		}
		s.mu.Unlock()
		s.l.Close()
	})
}

// connQueue is one server's side of a splitListener.
type connQueue struct {
	s *splitListener
	c chan net.Conn
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.c:
		return c, nil
	case <-q.s.done:
		return nil, net.ErrClosed
	}
}

// Close closes the TCP listener, for both servers, and waits for the
// connections being told apart.
func (q *connQueue) Close() error {
	q.s.close()
	q.s.wg.Wait()
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.s.l.Addr() }

// prefixedConn is a connection with its first bytes, read to tell its
// protocol, put back.
type prefixedConn struct {
	net.Conn
	head []byte
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
