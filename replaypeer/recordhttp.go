package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/sse"
	"github.com/baton-run/baton/sdk/transcript"
)

// recordHTTP records a provider that is an HTTP server with an event
// stream (`opencode serve`), in the HTTP frames of the transcript package.
//
// The command is cmd followed by args, ARGS,  the arguments the plugin appended to
// its provider command, recorded as the {"argv":[...]} expect_outbound
// frame (the value of portArg, the plugin's free port, as "<any>"). The
// real server runs as CMD ARGS with portArg's value replaced by another
// free port. The recorder listens on 127.0.0.1 itself, passes the
// server's stdout lines on with the server's address replaced by its own
// (recorded with "<listen>"), and proxies every request to the server,
// streaming event-stream responses through. Requests, responses and events
// are recorded in the order they pass, with the workspace changes between
// them as the stdio recorder records them.
//
// The client going away (stdin closing, or SIGTERM) ends the recording:
// the server is stopped with SIGTERM and a runtime_exit is written.
func recordHTTP(out string, appendTo bool, provider, protocol, scenario, workspace string, meta metaFlags, portArg string,
	cmd, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	upstreamPort, err := providerproc.FreePort()
	if err != nil {
		return err
	}
	recorded := slices.Clone(args)
	real := slices.Clone(args)
	if i := slices.Index(args, portArg); i >= 0 && i+1 < len(args) {
		recorded[i+1] = transcript.Any
		real[i+1] = strconv.Itoa(upstreamPort)
	}

	r, f, err := openRecorder(out, appendTo, provider, protocol, scenario, workspace, meta, cmd, transcript.InvocationFrame(recorded))
	if err != nil {
		return err
	}
	defer f.Close()
	r.labeler = httpLabel

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	own := "http://" + ln.Addr().String()
	proc, err := providerproc.Start(providerproc.Command{Argv: append(slices.Clone(cmd), real...), Dir: workspace,
		Stderr: func(l []byte) { fmt.Fprintf(stderr, "%s\n", l) }})
	if err != nil {
		ln.Close()
		return err
	}
	p := &httpProxy{r: r, upstream: make(chan string, 1), stopped: make(chan struct{})}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	// The server's stdout: each line recorded, and passed on with our
	// address for its own. A line too long to keep is skipped, and the
	// lines after it still read, as the stdio recorder reads.
	stdoutDone := make(chan struct{})
	go func() {
		defer close(stdoutDone)
		rd := ndjson.NewReader(proc.Stdout)
		found := false
		for {
			b, err := rd.Next()
			if errors.Is(err, ndjson.ErrLineTooLong) {
				fmt.Fprintf(stderr, "replaypeer record: the server's stdout: %v\n", err)
				continue
			}
			if err != nil {
				return
			}
			line := string(b)
			if u := serverURL.FindString(line); u != "" && !found {
				found = true
				p.upstream <- u
				line = strings.Replace(line, u, transcript.Listen, 1)
			}
			frame, _ := json.Marshal(map[string]string{"stdout": line})
			r.add(transcript.TypeEmitInbound, frame)
			fmt.Fprintln(stdout, strings.ReplaceAll(line, transcript.Listen, own))
		}
	}()

	// The client going away.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(gone)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	exitedFirst := false
	select {
	case <-gone:
	case <-sigs:
	case <-proc.Done():
		exitedFirst = true
	}
	r.clientDone()
	// The server's event streams end with it; their last events are still
	// recorded, then nothing more passes.
	if !exitedFirst {
		_ = syscall.Kill(-proc.Pid(), syscall.SIGTERM)
	}
	_ = proc.Close(context.Background())
	<-stdoutDone
	p.stop()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = srv.Close()
	return r.exit(proc.Err(), exitedFirst)
}

// serverURL finds the address a server prints.
var serverURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

// httpProxy passes requests to the server and records them.
type httpProxy struct {
	r        *recorder
	upstream chan string // the server's address, once it printed it

	mu         sync.Mutex
	base       string
	unanswered []string // labels of recorded requests without a recorded response
	stopped    chan struct{}
	stopOnce   sync.Once
}

func (p *httpProxy) stop() { p.stopOnce.Do(func() { close(p.stopped) }) }

func (p *httpProxy) server() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base == "" {
		select {
		case p.base = <-p.upstream:
		case <-time.After(30 * time.Second):
			return "", errors.New("the server printed no address")
		}
	}
	return p.base, nil
}

// answered takes label off the unanswered list and says how the response
// names it: "" when it is the oldest (the replay default).
func (p *httpProxy) answered(label string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.unanswered, label)
	if i < 0 {
		return label
	}
	p.unanswered = slices.Delete(p.unanswered, i, i+1)
	if i == 0 {
		return ""
	}
	return label
}

func (p *httpProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	base, err := p.server()
	if err != nil {
		http.Error(w, "replaypeer record: "+err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "replaypeer record: "+err.Error(), http.StatusBadRequest)
		return
	}
	// Recorded and listed under one lock, so that the list keeps the
	// transcript's order.
	p.mu.Lock()
	label := p.r.add(transcript.TypeExpectOutbound, transcript.RequestFrame(req, body))
	p.unanswered = append(p.unanswered, label)
	p.mu.Unlock()

	up, err := http.NewRequestWithContext(req.Context(), req.Method, base+req.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = req.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(up)
	if err != nil {
		http.Error(w, "replaypeer record: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ctype == "text/event-stream" {
		p.stream(w, resp, label)
		return
	}
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "replaypeer record: "+err.Error(), http.StatusBadGateway)
		return
	}
	frame := transcript.HTTPFrame{HTTP: transcript.HTTPResponse, Status: resp.StatusCode, Request: p.answered(label)}
	if len(strings.TrimSpace(string(rb))) > 0 {
		if ctype == "application/json" || (ctype == "" && json.Valid(rb)) {
			frame.Body = transcript.BodyValue(rb)
		} else {
			frame.Body, _ = json.Marshal(string(rb))
			frame.ContentType = resp.Header.Get("Content-Type")
		}
	}
	b, _ := transcript.MarshalHTTPFrame(frame)
	p.r.add(transcript.TypeEmitInbound, b)
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)
}

// stream passes an event stream through, recording each event.
func (p *httpProxy) stream(w http.ResponseWriter, resp *http.Response, label string) {
	b, _ := transcript.MarshalHTTPFrame(transcript.HTTPFrame{HTTP: transcript.HTTPResponse, Status: resp.StatusCode,
		Stream: true, Request: p.answered(label)})
	p.r.add(transcript.TypeEmitInbound, b)
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	events := make(chan sse.Event)
	go func() {
		defer close(events)
		d := sse.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			select {
			case events <- ev:
			case <-p.stopped:
				return
			}
		}
	}()
	enc := sse.NewEncoder(w)
	for {
		var ev sse.Event
		var ok bool
		select {
		case ev, ok = <-events:
		case <-p.stopped:
			ok = false
		}
		if !ok {
			return
		}
		frame := transcript.HTTPFrame{SSE: transcript.BodyValue(ev.Data), Event: ev.Event, ID: ev.ID}
		if len(frame.SSE) == 0 {
			frame.SSE = json.RawMessage(`""`)
		}
		b, _ := transcript.MarshalHTTPFrame(frame)
		p.r.add(transcript.TypeEmitInbound, b)
		if err := enc.Encode(ev); err != nil {
			continue // the client left; the server's events are still recorded
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// httpLabel names an HTTP frame: "3.POST /session", "4.response 200",
// "5.session.idle" (an event by its type), "1.argv", "2.stdout".
func httpLabel(typ string, frame []byte, seq int) string {
	var f struct {
		transcript.HTTPFrame
		Argv []string `json:"argv"`
	}
	_ = json.Unmarshal(frame, &f)
	name := ""
	switch {
	case f.Argv != nil:
		name = "argv"
	case f.HTTP == transcript.HTTPRequest:
		name = f.Method + " " + f.Path
	case f.HTTP == transcript.HTTPResponse:
		name = "response " + strconv.Itoa(f.Status)
	case len(f.SSE) > 0:
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(f.SSE, &ev)
		name = "sse"
		if ev.Type != "" {
			name = ev.Type
		}
	case f.Stdout != nil:
		name = "stdout"
	}
	return fmt.Sprintf("%d.%s", seq, name)
}
