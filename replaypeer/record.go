package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-run/baton/sdk/ndjson"
	"github.com/baton-run/baton/sdk/providerproc"
	"github.com/baton-run/baton/sdk/transcript"
)

// recordMain runs the real provider between the plugin and itself and writes
// every frame it passes on, in order, as a transcript.
func recordMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replaypeer record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "transcript `file` to write")
	provider := fs.String("provider", "", "provider name for the header")
	protocol := fs.String("protocol", "", "wire protocol for the header")
	scenario := fs.String("scenario", "", "scenario name for the header")
	workspace := fs.String("workspace", "", "provider working directory (default: the current directory)")
	appendTo := fs.Bool("append", false, "append to the transcript if it exists (a provider restarted in the same scenario)")
	invoked := fs.Bool("invocation", false, "the command ends in \"--\"; what follows it (the client's arguments) is recorded as the invocation frame")
	var meta metaFlags
	fs.Var(&meta, "meta", "header metadata `key=value` (repeatable)")
	httpProxy := fs.Bool("http-proxy", false, "the provider is an HTTP server (see recordHTTP); implies --invocation")
	portArg := fs.String("port-arg", "--port", "with --http-proxy: the `flag` among the client's arguments whose value is the server's port")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	var invocation []string
	if *invoked || *httpProxy {
		i := slices.Index(argv, "--")
		if i < 0 {
			argv = nil // bad usage
		} else {
			invocation = append([]string{}, argv[i+1:]...)
			argv = append(argv[:i:i], invocation...)
		}
	}
	if *out == "" || *provider == "" || *scenario == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "usage: replaypeer record --out FILE --provider NAME --protocol P --scenario NAME --meta agentVersion=V --meta model=M [--workspace DIR] [--meta k=v] [--append] [--invocation] -- ARGV... [-- ARGS...]")
		return 2
	}
	if *protocol == "" {
		fmt.Fprintln(stderr, "replaypeer record: --protocol is required: the plugin's wire protocol (its Describe WireProtocol), which a transcript names to be played for that plugin")
		return 2
	}
	// A recorded transcript says what it was recorded from (its header's
	// version is the provider's; see transcript.Header).
	for _, k := range []string{"agentVersion", "model"} {
		if v, _ := meta[k].(string); v == "" {
			fmt.Fprintf(stderr, "replaypeer record: --meta %s=... is required: a recorded transcript says which provider version and model it was recorded from\n", k)
			return 2
		}
	}
	if *workspace == "" {
		*workspace, _ = os.Getwd()
	}
	run := record
	if *httpProxy {
		run = func(out string, appendTo bool, provider, protocol, scenario, workspace string, meta metaFlags, argv, invocation []string,
			stdin io.Reader, stdout, stderr io.Writer) error {
			return recordHTTP(out, appendTo, provider, protocol, scenario, workspace, meta, *portArg,
				argv[:len(argv)-len(invocation)], invocation, stdin, stdout, stderr)
		}
	}
	if err := run(*out, *appendTo, *provider, *protocol, *scenario, *workspace, meta, argv, invocation, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "replaypeer record: %v\n", err)
		return 1
	}
	return 0
}

type metaFlags map[string]any

func (m *metaFlags) String() string { return fmt.Sprint(map[string]any(*m)) }
func (m *metaFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want key=value, got %q", s)
	}
	if *m == nil {
		*m = metaFlags{}
	}
	(*m)[k] = v
	return nil
}

type recorder struct {
	mu        sync.Mutex
	enc       *transcript.Encoder
	last      time.Time
	workspace string
	files     map[string][32]byte
	redact    *redactor
	seq       int
	// labeler names entries (default: label, for JSON-RPC frames).
	labeler func(typ string, frame []byte, seq int) string
}

// record runs argv; invocation, when not nil, is the part of argv the client
// added, recorded as the process's first outbound frame.
func record(out string, appendTo bool, provider, protocol, scenario, workspace string, meta metaFlags, argv, invocation []string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	var first []byte
	if invocation != nil {
		first = transcript.InvocationFrame(invocation)
	}
	r, f, err := openRecorder(out, appendTo, provider, protocol, scenario, workspace, meta, argv, first)
	if err != nil {
		return err
	}
	defer f.Close()

	proc, err := providerproc.Start(providerproc.Command{Argv: argv, Dir: workspace,
		Stderr: func(l []byte) { fmt.Fprintf(stderr, "%s\n", l) }})
	if err != nil {
		return err
	}
	// The plugin stops its provider with SIGTERM; the provider behind us
	// must stop too, and the transcript must still be finished.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			_ = proc.Close(context.Background())
		}
	}()
	w := ndjson.NewWriter(stdout)
	done := make(chan struct{})
	go func() { // provider -> client
		defer close(done)
		rd := ndjson.NewReader(proc.Stdout)
		for {
			b, err := rd.Next()
			if err != nil {
				return
			}
			r.add(transcript.TypeEmitInbound, b)
			if err := w.Write(b); err != nil {
				return
			}
		}
	}()
	pw := ndjson.NewWriter(proc.Stdin)
	rd := ndjson.NewReader(stdin)
	for { // client -> provider
		b, err := rd.Next()
		if err != nil {
			break
		}
		r.add(transcript.TypeExpectOutbound, b)
		if err := pw.Write(b); err != nil {
			break
		}
	}
	r.clientDone()
	// If the provider already exited on its own, that
	// exit is the transcript's end; otherwise closing its stdin (and, for
	// agents that ignore that, stopping it) is the client's doing, and the
	// replay peer reproduces it as an exit after stdin closes.
	exitedFirst := false
	select {
	case <-proc.Done():
		exitedFirst = true
	default:
	}
	_ = proc.Close(context.Background())
	<-done
	return r.exit(proc.Err(), exitedFirst)
}

// clientDone takes the workspace as it is without recording it: the client
// is done, and what changed since its last frame is its own doing too (a
// host restoring files before it closed the session).
func (r *recorder) clientDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files = r.scan()
}

// exit records the provider's end, once nothing more passes: the workspace
// changes it made last, and the runtime_exit. An error exit is recorded
// only when the provider exited on its own (exitedFirst); otherwise its end
// was the client's doing, which a replay reproduces as a clean exit.
func (r *recorder) exit(err error, exitedFirst bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workspaceChanges()
	e := transcript.Entry{Type: transcript.TypeRuntimeExit, Status: transcript.ExitSuccess}
	if err != nil && exitedFirst {
		e.Status, e.Error = transcript.ExitError, err.Error()
	}
	return r.enc.Encode(e)
}

// openRecorder opens (or, appending, continues) the transcript out, records
// invocation (the process's arguments as its first outbound frame, when not
// nil: first, so that transcript.Invoked sees it) and the workspace as the
// provider finds it.
func openRecorder(out string, appendTo bool, provider, protocol, scenario, workspace string, meta metaFlags,
	argv []string, invocation []byte) (*recorder, *os.File, error) {
	continuing := false
	if fi, err := os.Stat(out); appendTo && err == nil && fi.Size() > 0 {
		continuing = true
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if continuing {
		flags = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(out, flags, 0o644)
	if err != nil {
		return nil, nil, err
	}
	var enc *transcript.Encoder
	if continuing {
		enc = transcript.NewEntryEncoder(f)
	} else {
		if meta == nil {
			meta = metaFlags{}
		}
		meta["source"] = transcript.SourceRecorded
		meta["capturedAt"] = time.Now().UTC().Format(time.RFC3339)
		meta["cwdPolicy"] = "workspace placeholder"
		meta["command"] = filepath.Base(argv[0])
		version, _ := meta["agentVersion"].(string)
		if enc, err = transcript.NewEncoder(f, transcript.Header{Provider: provider, Protocol: protocol, Version: version,
			Scenario: scenario, Metadata: meta}); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	r := &recorder{enc: enc, last: time.Now(), workspace: workspace, redact: newRedactor(workspace),
		files: map[string][32]byte{}}
	if invocation != nil {
		// Not through add: the workspace as the provider finds it is
		// recorded next, not taken as the client's doing.
		r.seq++
		_ = r.enc.Encode(transcript.Entry{Type: transcript.TypeExpectOutbound, Frame: r.redact.frame(invocation),
			Label: label(transcript.TypeExpectOutbound, invocation, r.seq)})
	}
	if continuing {
		// The files are where the last provider left them: the transcript
		// already made them.
		r.files = r.scan()
	} else {
		// The workspace as the provider found it comes first, so that a
		// replay starts from the same files.
		r.workspaceChanges()
	}
	return r, f, nil
}

// add records a frame. The workspace changes found before a frame from the
// provider are the provider's, and are recorded for a replay to make; the
// ones found before a frame from the client are the client's own (a file
// the plugin wrote for an ACP fs/write_text_file request, a host restoring
// a checkpoint), which a replay's client makes again itself: they are
// taken as the new state without being recorded.
func (r *recorder) add(typ string, frame []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if typ == transcript.TypeExpectOutbound {
		r.files = r.scan()
	} else {
		r.workspaceChanges()
	}
	r.seq++
	name := label
	if r.labeler != nil {
		name = r.labeler
	}
	e := transcript.Entry{Type: typ, Frame: r.redact.frame(frame), Label: name(typ, frame, r.seq)}
	if typ == transcript.TypeEmitInbound {
		e.AfterMs = int(time.Since(r.last) / time.Millisecond)
	}
	r.last = time.Now()
	_ = r.enc.Encode(e)
	return e.Label
}

// label names a frame by its method, or as the response it is.
func label(typ string, frame []byte, seq int) string {
	var f struct {
		Method string          `json:"method"`
		Type   string          `json:"type"`
		ID     json.RawMessage `json:"id"`
		Argv   []string        `json:"argv"`
		Params struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
			} `json:"update"`
		} `json:"params"`
	}
	_ = json.Unmarshal(frame, &f)
	name := f.Method
	switch {
	case f.Params.Update.SessionUpdate != "":
		name += "." + f.Params.Update.SessionUpdate
	case name == "" && f.ID != nil:
		name = "response." + string(f.ID)
	case name == "" && f.Argv != nil:
		name = "invocation"
	case name == "":
		name = f.Type
	}
	return fmt.Sprintf("%d.%s", seq, name)
}

// scan hashes every file in the workspace but .git.
func (r *recorder) scan() map[string][32]byte {
	files := map[string][32]byte{}
	_ = filepath.WalkDir(r.workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil {
				rel, _ := filepath.Rel(r.workspace, p)
				files[filepath.ToSlash(rel)] = sha256.Sum256(b)
			}
		}
		return nil
	})
	return files
}

// workspaceChanges records what changed in the workspace since the last
// frame as workspace entries.
func (r *recorder) workspaceChanges() {
	now := r.scan()
	var paths []string
	for p, h := range now {
		if old, ok := r.files[p]; !ok || old != h {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(r.workspace, p))
		if err != nil {
			continue
		}
		content := string(b)
		_ = r.enc.Encode(transcript.Entry{Type: transcript.TypeWorkspace, Op: transcript.OpWrite, Path: p, Content: &content})
	}
	var gone []string
	for p := range r.files {
		if _, ok := now[p]; !ok {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		_ = r.enc.Encode(transcript.Entry{Type: transcript.TypeWorkspace, Op: transcript.OpDelete, Path: p})
	}
	r.files = now
}

// redactor removes secrets and machine paths from frames while keeping ids,
// methods and ordering: the workspace becomes "<workspace>", the home
// directory "/home/user", keys, tokens and e-mail addresses placeholders.
type redactor struct {
	workspace, home string
	patterns        []*regexp.Regexp
	repl            []string
}

func newRedactor(workspace string) *redactor {
	home, _ := os.UserHomeDir()
	return &redactor{workspace: workspace, home: home,
		patterns: []*regexp.Regexp{
			regexp.MustCompile(`sk-[A-Za-z0-9_\-]{8,}`),
			regexp.MustCompile(`(?i)bearer [A-Za-z0-9._\-]{8,}`),
			regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`),
		},
		repl: []string{"sk-REDACTED", "Bearer REDACTED", "user@example.com"},
	}
}

func (r *redactor) frame(b []byte) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		s, _ := json.Marshal(r.text(string(b)))
		return s
	}
	v = r.value(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func (r *redactor) value(v any) any {
	switch t := v.(type) {
	case string:
		return r.text(t)
	case map[string]any:
		// Keys too: an agent may key a map by path (codex-acp's rawInput
		// "changes", one entry a file).
		renamed := map[string]any{}
		for k, x := range t {
			x = r.value(x)
			if rk := r.text(k); rk != k {
				delete(t, k)
				renamed[rk] = x
				continue
			}
			t[k] = x
		}
		maps.Copy(t, renamed)
	case []any:
		for i, x := range t {
			t[i] = r.value(x)
		}
	}
	return v
}

func (r *redactor) text(s string) string {
	if r.workspace != "" {
		s = strings.ReplaceAll(s, r.workspace, transcript.Workspace)
	}
	if r.home != "" && r.home != "/" {
		s = strings.ReplaceAll(s, r.home, "/home/user")
	}
	for i, p := range r.patterns {
		s = p.ReplaceAllString(s, r.repl[i])
	}
	return s
}
