package service_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/service"
)

// pages is a dashboard for the tests: an index and one asset.
var pages = fstest.MapFS{
	"index.html": {Data: []byte("<!doctype html><title>Baton</title><script src=/app.js></script>")},
	"app.js":     {Data: []byte("console.log('baton')")},
}

// webClient is a browser's HTTP side: no redirects followed, cookies as
// the test sets them.
func webClient(tlsConf *tls.Config) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
}

// webCall is one HTTP request's answer: its status, headers and body.
type webCall struct {
	status int
	header http.Header
	body   string
	proto  string // HTTP/1.1, HTTP/2.0
}

func do(t *testing.T, c *http.Client, method, u string, header http.Header, body string) webCall {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return webCall{resp.StatusCode, resp.Header, string(b), resp.Proto}
}

// connectJSON is the headers of a Connect unary call with a JSON body.
func connectJSON(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// loginCode asks the service, over its socket, for a sign-in link.
func loginCode(t *testing.T, data, thread string) *batonv1.LoginCode {
	t.Helper()
	c := batonv1.NewBatonClient(dialUnix(t, filepath.Join(data, service.SocketName)))
	code, err := c.CreateLoginCode(t.Context(), &batonv1.CreateLoginCodeRequest{ThreadId: thread})
	if err != nil {
		t.Fatalf("CreateLoginCode: %v", err)
	}
	return code
}

// signIn opens a sign-in link and returns the session cookie's header
// value (baton_session=...) and the cookie as the service set it.
func signIn(t *testing.T, c *http.Client, link string) (string, *http.Cookie, webCall) {
	t.Helper()
	r := do(t, c, http.MethodGet, link, nil, "")
	cookies := (&http.Response{Header: r.header}).Cookies()
	if r.status != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign in: %d %v %q; want 303 with one cookie", r.status, r.header, r.body)
	}
	return cookies[0].Name + "=" + cookies[0].Value, cookies[0], r
}

// A browser signs in with a one-time code and then reaches the pages and
// the API with its cookie, from the service's own origin only: without a
// session it gets nothing but how to sign in; a code works once; another
// origin (or none) is refused 403; the session cannot make codes; sign
// out ends it. The token is in no answer, and gRPC still answers on the
// same TCP address.
func TestWebSignIn(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	var logs syncBuffer
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}, Pages: pages, Logger: testLoggerTo(&logs)})
	base := "http://" + strings.TrimPrefix(s.addrs[1], "tcp://")
	token := readToken(t, data)
	c := webClient(nil)
	var answers []webCall
	call := func(method, path string, h http.Header, body string) webCall {
		r := do(t, c, method, base+path, h, body)
		answers = append(answers, r)
		return r
	}

	// Nothing without a session.
	for _, p := range []string{"/", "/app.js", "/threads/x"} {
		if r := call(http.MethodGet, p, nil, ""); r.status != http.StatusUnauthorized || strings.Contains(r.body, "app.js") ||
			!strings.Contains(r.body, "Run `baton ui`") {
			t.Errorf("GET %s without a session: %d %q; want 401 and how to sign in", p, r.status, r.body)
		}
	}
	if r := call(http.MethodPost, "/baton.v1.Baton/ListThreads", connectJSON("Origin", base), "{}"); r.status != http.StatusUnauthorized ||
		!strings.Contains(r.body, `"code":"unauthenticated"`) {
		t.Errorf("API without a session: %d %q; want 401 unauthenticated", r.status, r.body)
	}

	code := loginCode(t, data, "")
	if want := base + "/login?code="; !strings.HasPrefix(code.GetUrl(), want) || !cmp.Equal(code.GetUrls(), []string{code.GetUrl()}) {
		t.Fatalf("login code %v; want one url starting %s", code, want)
	}
	cookie, attrs, r := signIn(t, c, code.GetUrl())
	answers = append(answers, r)
	if loc := r.header.Get("Location"); loc != "/" {
		t.Errorf("sign in sent the browser to %q, want /", loc)
	}
	want := http.Cookie{Name: "baton_session", Value: attrs.Value, Path: "/", MaxAge: 12 * 3600, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	got := *attrs
	got.Raw, got.Expires, got.RawExpires = "", time.Time{}, ""
	if !cmp.Equal(got, want) {
		t.Errorf("cookie %+v, want %+v", got, want)
	}
	if r := call(http.MethodGet, strings.TrimPrefix(code.GetUrl(), base), nil, ""); r.status != http.StatusUnauthorized || len(r.header.Values("Set-Cookie")) != 0 {
		t.Errorf("the same code again: %d %v; want 401 and no cookie", r.status, r.header)
	}

	withCookie := http.Header{"Cookie": {cookie}}
	for p, wantBody := range map[string]string{"/": "<!doctype html>", "/threads/01ABC": "<!doctype html>", "/app.js": "console.log"} {
		r := call(http.MethodGet, p, withCookie, "")
		if r.status != http.StatusOK || !strings.HasPrefix(r.body, wantBody) {
			t.Errorf("GET %s signed in: %d %q; want 200 %q...", p, r.status, r.body, wantBody)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
	}

	api := func(method, origin string, extra ...string) webCall {
		h := connectJSON(append([]string{"Cookie", cookie}, extra...)...)
		if origin != "" {
			h.Set("Origin", origin)
		}
		return call(http.MethodPost, "/baton.v1.Baton/"+method, h, "{}")
	}
	if r := api("ListThreads", base); r.status != http.StatusOK || strings.Join(strings.Fields(r.body), "") != `{"threads":[],"nextPageToken":""}` {
		t.Errorf("ListThreads signed in: %d %q; want 200 and no threads", r.status, r.body)
	}
	for _, tc := range []struct {
		name, origin string
		extra        []string
	}{
		{"another origin", "http://127.0.0.1:1", nil},
		{"another scheme", strings.Replace(base, "http:", "https:", 1), nil},
		{"no origin", "", nil},
		{"a cross-site fetch", base, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		if r := api("ListThreads", tc.origin, tc.extra...); r.status != http.StatusForbidden || !strings.Contains(r.body, `"code":"permission_denied"`) {
			t.Errorf("%s: %d %q; want 403 permission_denied", tc.name, r.status, r.body)
		}
	}
	if r := api("CreateLoginCode", base); r.status != http.StatusForbidden || !strings.Contains(r.body, "permission_denied") ||
		!strings.Contains(r.body, "cannot make sign-in codes") {
		t.Errorf("a session making a code: %d %q; want permission_denied", r.status, r.body)
	}
	// A browser cannot pass itself off as a bearer caller to make codes.
	if r := api("CreateLoginCode", base, "Baton-Browser", ""); r.status != http.StatusForbidden {
		t.Errorf("a session making a code without the mark: %d %q; want 403", r.status, r.body)
	}
	// A bearer caller needs no cookie nor Origin, and may make codes.
	if r := call(http.MethodPost, "/baton.v1.Baton/CreateLoginCode", connectJSON("Authorization", "Bearer "+token, "Baton-Browser", "1"), "{}"); r.status != http.StatusOK ||
		!strings.Contains(r.body, base+"/login?code=") {
		t.Errorf("CreateLoginCode with the token: %d %q", r.status, r.body)
	}
	if r := call(http.MethodPost, "/baton.v1.Baton/ListThreads", connectJSON("Authorization", "Bearer wrong"), "{}"); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %q; want 401", r.status, r.body)
	}

	// gRPC on the same address.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	if _, err := batonv1.NewBatonClient(dialTCP(t, strings.TrimPrefix(base, "http://"), insecure.NewCredentials())).ListThreads(ctx, &batonv1.ListThreadsRequest{}); err != nil {
		t.Errorf("gRPC beside the web: %v", err)
	}

	// Sign out: refused from another origin, then done; the cookie is dead.
	if r := call(http.MethodPost, "/logout", http.Header{"Cookie": {cookie}, "Origin": {"http://127.0.0.1:1"}}, ""); r.status != http.StatusForbidden {
		t.Errorf("sign out from another origin: %d", r.status)
	}
	if r := call(http.MethodPost, "/logout", http.Header{"Cookie": {cookie}, "Origin": {base}}, ""); r.status != http.StatusNoContent ||
		!strings.Contains(r.header.Get("Set-Cookie"), "baton_session=; Path=/; Max-Age=0") {
		t.Errorf("sign out: %d %v", r.status, r.header)
	}
	if r := api("ListThreads", base); r.status != http.StatusUnauthorized {
		t.Errorf("after sign out: %d %q; want 401", r.status, r.body)
	}
	if r := call(http.MethodGet, "/", withCookie, ""); r.status != http.StatusUnauthorized {
		t.Errorf("page after sign out: %d", r.status)
	}

	for _, a := range answers {
		if strings.Contains(a.body, token) || strings.Contains(strings.Join(a.header.Values("Set-Cookie"), " "), token) {
			t.Errorf("an answer holds the token: %d %q", a.status, a.body)
		}
	}
	if l := logs.String(); strings.Contains(l, token) || strings.Contains(l, strings.TrimPrefix(code.GetUrl(), base+"/login?code=")) {
		t.Errorf("the log holds the token or a code:\n%s", l)
	}
}

// A link for a thread opens its page; one for a thread that does not
// exist is refused; a service with no TCP listener says which flag to
// give.
func TestWebSignInThread(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}, Pages: pages})
	id := onService(t, data).create("c1", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	code := loginCode(t, data, id)
	_, _, r := signIn(t, webClient(nil), code.GetUrl())
	if loc := r.header.Get("Location"); loc != "/threads/"+id {
		t.Errorf("sign in for a thread went to %q, want /threads/%s", loc, id)
	}
	c := batonv1.NewBatonClient(dialUnix(t, filepath.Join(data, service.SocketName)))
	if _, err := c.CreateLoginCode(t.Context(), &batonv1.CreateLoginCodeRequest{ThreadId: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("a code for no thread: %v, want NotFound", err)
	}

	unixOnly := filepath.Join(shortDir(t), "data")
	serve(t, service.Config{DataDir: unixOnly})
	c = batonv1.NewBatonClient(dialUnix(t, filepath.Join(unixOnly, service.SocketName)))
	_, err := c.CreateLoginCode(t.Context(), &batonv1.CreateLoginCodeRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "--listen tcp://127.0.0.1:7077") {
		t.Errorf("a code from a socket-only service: %v; want FailedPrecondition naming --listen", err)
	}
}

// Over TLS, a gRPC client (ALPN h2 only) and a browser (h2 and http/1.1)
// share the listener; the browser's cookie is Secure, its origin https.
func TestWebTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}, TLSCert: certFile, TLSKey: keyFile, Pages: pages})
	addr := strings.TrimPrefix(s.addrs[1], "tcp://")
	base := "https://" + addr
	code := loginCode(t, data, "")
	if !strings.HasPrefix(code.GetUrl(), base+"/login?code=") {
		t.Fatalf("link %s, want %s/login", code.GetUrl(), base)
	}
	c := webClient(&tls.Config{RootCAs: pool})
	cookie, attrs, _ := signIn(t, c, code.GetUrl())
	if !attrs.Secure {
		t.Errorf("cookie over TLS not Secure: %+v", attrs)
	}
	// A browser offers h2 and http/1.1: it gets h2, so that its tabs'
	// streams share a connection; a client of http/1.1 alone gets that.
	if r := do(t, c, http.MethodPost, base+"/baton.v1.Baton/ListThreads", connectJSON("Cookie", cookie, "Origin", base), "{}"); r.status != http.StatusOK ||
		r.proto != "HTTP/2.0" {
		t.Errorf("API over TLS: %d %s %q; want 200 over HTTP/2.0", r.status, r.proto, r.body)
	}
	h1 := webClient(&tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
	h1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	if r := do(t, h1, http.MethodPost, base+"/baton.v1.Baton/ListThreads", connectJSON("Cookie", cookie, "Origin", base), "{}"); r.status != http.StatusOK ||
		r.proto != "HTTP/1.1" {
		t.Errorf("API over TLS, HTTP/1.1 only: %d %s %q; want 200 over HTTP/1.1", r.status, r.proto, r.body)
	}
	if r := do(t, c, http.MethodPost, base+"/baton.v1.Baton/ListThreads", connectJSON("Cookie", cookie, "Origin", "http://"+addr), "{}"); r.status != http.StatusForbidden {
		t.Errorf("API over TLS from the http origin: %d %q; want 403", r.status, r.body)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+readToken(t, data))
	if _, err := batonv1.NewBatonClient(dialTCP(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool}))).ListThreads(ctx, &batonv1.ListThreadsRequest{}); err != nil {
		t.Errorf("gRPC over TLS beside the web: %v", err)
	}
}

// A server-streaming call in the Connect protocol (what the page's
// Subscribe is) carries the thread's events as the service commits them.
func TestWebSubscribe(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}})
	base := "http://" + strings.TrimPrefix(s.addrs[1], "tcp://")
	id := onService(t, data).create("c1", "", "acp", "acp/simple.ndjson", "").GetThreadId()
	c := webClient(nil)
	c.Timeout = 0
	cookie, _, _ := signIn(t, c, loginCode(t, data, "").GetUrl())
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// A Connect stream: each message is a flag byte and a big-endian
	// length before its JSON.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/baton.v1.Baton/Subscribe",
		strings.NewReader(envelope(`{"threadId":"`+id+`"}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/connect+json"}, "Connect-Protocol-Version": {"1"}, "Cookie": {cookie}, "Origin": {base}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Subscribe: %d %s", resp.StatusCode, b)
	}
	if typ := jsonField(readEnvelope(t, resp.Body), "type"); typ != "thread.created" {
		t.Fatalf("first event %q, want thread.created", typ)
	}
	// The page sends a message: a run starts, and the stream shows it.
	send, _ := json.Marshal(map[string]string{"commandId": "web-send", "threadId": id, "text": messages(t, "acp/simple.messages")[0], "mode": "queue"})
	if r := do(t, c, http.MethodPost, base+"/baton.v1.Baton/SendMessage", connectJSON("Cookie", cookie, "Origin", base), string(send)); r.status != http.StatusOK ||
		!strings.Contains(r.body, `"commandId":"web-send"`) {
		t.Fatalf("SendMessage from the page: %d %q", r.status, r.body)
	}
	var types []string
	for len(types) == 0 || types[len(types)-1] != "run.ended" {
		types = append(types, jsonField(readEnvelope(t, resp.Body), "type"))
	}
	if types[0] != "message.added" || !slices.Contains(types, "message.delta") {
		t.Errorf("events over Connect: %v; want message.added first, deltas, to run.ended", types)
	}
}

func envelope(msg string) string {
	n := len(msg)
	return string([]byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + msg
}

func readEnvelope(t *testing.T, r io.Reader) string {
	t.Helper()
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		t.Fatalf("read a stream message: %v", err)
	}
	n := int(head[1])<<24 | int(head[2])<<16 | int(head[3])<<8 | int(head[4])
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("read a stream message: %v", err)
	}
	if head[0]&2 != 0 {
		t.Fatalf("the stream ended: %s", b)
	}
	return string(b)
}

// jsonField is a top-level string field of a JSON object, by a plain
// search: enough for an event's type.
func jsonField(obj, name string) string {
	_, rest, ok := strings.Cut(obj, `"`+name+`":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func readToken(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, service.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// onService is an env whose client is a served data dir's socket: its
// create runs a thread on that service.
func onService(t *testing.T, data string) *env {
	conn := dialUnix(t, filepath.Join(data, service.SocketName))
	t.Cleanup(func() { conn.Close() })
	return &env{t: t, data: data, ws: t.TempDir(), client: batonv1.NewBatonClient(conn), conn: conn}
}

func testLoggerTo(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}
