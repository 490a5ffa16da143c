package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"connectrpc.com/vanguard"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The web side of the service: what a browser reaches on a TCP listener
// (split.go hands it the HTTP/1.1 and browser TLS connections).
//
//	GET  /login?code=CODE[&thread=ID]  a one-time code for a session cookie, then the page
//	POST /logout                       ends the session
//	POST /baton.v1.Baton/METHOD        the API, in the Connect protocol (JSON or binary), or gRPC-Web
//	GET  anything else                 the dashboard (Pages): a file, or its index.html
//
// The API is the same baton.v1 service the CLI calls: vanguard's
// transcoder turns each Connect or gRPC-Web call into a gRPC call to the
// service's own grpc.Server, through its interceptors. A browser proves
// itself with its session cookie and an Origin that is the service's own;
// the transcoded call then carries the service's token (which never
// leaves the service) and the browser mark (browserHeader). A caller with
// a bearer token of its own (curl, a script) needs no cookie or Origin.
// Anything else gets 401 and nothing of the service.

// sessionCookie is the name of the browser's session cookie.
const sessionCookie = "baton_session"

// browserHeader marks a call that came from a browser's session: the
// service's handlers see it as the metadata baton-browser, and refuse what
// a browser may not do (CreateLoginCode). An incoming one is dropped.
const browserHeader = "Baton-Browser"

// apiPrefixes are the paths of the services a browser may call.
var apiPrefixes = []string{"/" + Service + "/", "/" + healthpb.Health_ServiceDesc.ServiceName + "/"}

// webHandler serves the web side.
type webHandler struct {
	sessions *sessions
	api      http.Handler
	pages    fs.FS // nil: the binary has no dashboard
	token    string
	tls      bool
	log      hclog.Logger
}

// newWebHandler puts the Connect and gRPC-Web transcoder in front of g
// (whose services must be registered).
func newWebHandler(g *grpc.Server, ss *sessions, pages fs.FS, token string, tls bool, log hclog.Logger) (*webHandler, error) {
	var svcs []*vanguard.Service
	for _, name := range []string{Service, healthpb.Health_ServiceDesc.ServiceName} {
		svcs = append(svcs, vanguard.NewService(name, g))
	}
	api, err := vanguard.NewTranscoder(svcs, vanguard.WithDefaultServiceOptions(
		vanguard.WithTargetCodecs(vanguard.CodecProto),
		vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
		vanguard.WithMaxMessageBufferBytes(maxRequest),
	))
	if err != nil {
		return nil, fmt.Errorf("web: transcoder: %w", err)
	}
	return &webHandler{sessions: ss, api: api, pages: pages, token: token, tls: tls, log: log}, nil
}

func (h *webHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case r.URL.Path == "/login":
		h.login(w, r)
	case r.URL.Path == "/logout":
		h.logout(w, r)
	case isAPI(r.URL.Path):
		h.call(w, r)
	default:
		h.page(w, r)
	}
}

func isAPI(p string) bool {
	for _, prefix := range apiPrefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// login exchanges a one-time code for a session and sends the browser to
// its page, with the code gone from its address bar.
func (h *webHandler) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	sid, thread, expires, ok := h.sessions.redeem(r.URL.Query().Get("code"))
	if !ok {
		h.log.Warn("a sign-in was refused: its code is unknown, used or expired", "peer", r.RemoteAddr)
		signedOut(w, http.StatusUnauthorized, "This sign-in link is used or expired. Run `baton ui` for a new one.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", Expires: expires, MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, Secure: h.tls, SameSite: http.SameSiteStrictMode})
	to := "/"
	if thread != "" {
		to = "/threads/" + url.PathEscape(thread)
	}
	h.log.Info("a browser signed in", "peer", r.RemoteAddr, "until", expires.UTC().Format(time.RFC3339))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// logout ends the browser's session.
func (h *webHandler) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if err := h.sameOrigin(r); err != nil {
		h.refuse(w, r, err)
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		h.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: h.tls, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// call passes an API call to the transcoder: a browser's with the
// service's token, a bearer caller's as it came (the service's
// interceptor checks its token).
func (h *webHandler) call(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(browserHeader)
	if r.Header.Get("Authorization") == "" {
		if !h.session(r) {
			connectError(w, http.StatusUnauthorized, "unauthenticated", "sign in with `baton ui`, or send the service's token: authorization: Bearer TOKEN")
			return
		}
		if err := h.sameOrigin(r); err != nil {
			h.refuse(w, r, err)
			return
		}
		r.Header.Set("Authorization", "Bearer "+h.token)
		r.Header.Set(browserHeader, "1")
	}
	h.api.ServeHTTP(headerFlusher{w}, r)
}

// headerFlusher sends a stream's headers as soon as they are written.
// vanguard writes them when the gRPC server sends its own (Subscribe does
// at once) but flushes only at a message, so a stream with nothing to say
// yet would look unanswered to the browser, which waits for them to show
// the stream open. A unary answer is written whole at once, unflushed.
type headerFlusher struct{ http.ResponseWriter }

func (w headerFlusher) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if ct := w.Header().Get("Content-Type"); strings.HasPrefix(ct, "application/connect+") || strings.HasPrefix(ct, "application/grpc-web") {
		w.Flush()
	}
}

func (w headerFlusher) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the writer underneath.
func (w headerFlusher) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// page serves the dashboard to a signed-in browser: a file of Pages, or
// its index.html for any other path (the page routes itself).
func (h *webHandler) page(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	if !h.session(r) {
		signedOut(w, http.StatusUnauthorized, "You are not signed in. Run `baton ui` and open the link it prints.")
		return
	}
	if h.pages == nil {
		signedOut(w, http.StatusNotFound, "This baton was built without its dashboard.")
		return
	}
	w.Header().Set("Content-Security-Policy", pagePolicy)
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if fi, err := fs.Stat(h.pages, name); name == "" || err != nil || fi.IsDir() {
		name = "index.html"
		w.Header().Set("Cache-Control", "no-store")
	}
	http.ServeFileFS(w, r, h.pages, name)
}

// pagePolicy is the dashboard's Content-Security-Policy: its own files
// and API only; nothing inline, nothing from elsewhere, no framing.
const pagePolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// session says whether r carries a live session's cookie.
func (h *webHandler) session(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	return err == nil && h.sessions.valid(c.Value)
}

// sameOrigin checks that r came from the service's own page: its Origin
// (which a browser sends with every POST) is this service's scheme and
// host, and the browser did not say it came from another site.
func (h *webHandler) sameOrigin(r *http.Request) error {
	scheme := "http"
	if h.tls {
		scheme = "https"
	}
	want := scheme + "://" + r.Host
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
		return errors.New("the request has no Origin")
	case !strings.EqualFold(origin, want):
		return fmt.Errorf("its Origin %s is not the service's own (%s)", origin, want)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("the browser says it came from another site (Sec-Fetch-Site: %s)", site)
	}
	return nil
}

// refuse answers a request from another origin 403, and logs it.
func (h *webHandler) refuse(w http.ResponseWriter, r *http.Request, why error) {
	h.log.Warn("a cross-origin request was refused", "path", r.URL.Path, "peer", r.RemoteAddr, "reason", why.Error())
	connectError(w, http.StatusForbidden, "permission_denied", "refused: "+why.Error())
}

// connectError answers as the Connect protocol answers a unary call's
// error, which a Connect client reads as a typed error.
func connectError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg}) // strings only: it cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// signedOut is the page a browser gets without a session: what to do,
// and nothing of the service.
func signedOut(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>Baton</title><p>%s</p>\n", htmlEscape(msg))
}

var htmlEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace
