// Command baton-modelserver serves a scripted model API on a local address,
// for driving real agents in tests and transcript recordings without a real
// model: the Anthropic Messages API (Claude Code; the default) or the OpenAI
// Responses API (codex, with --api openai-responses) or the Gemini API
// (gemini-cli, with --api gemini).
//
//	baton-modelserver --script replies.json [--api anthropic|openai-responses|gemini] [--addr 127.0.0.1:0] [--log requests.jsonl]
//
// The first line on stdout is "listening on http://HOST:PORT". Request
// summaries go to stderr. It serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-run/baton/host/internal/modelserver"
)

func main() {
	script := flag.String("script", "", "JSON script file: a list of replies, each a list of content blocks")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	logPath := flag.String("log", "", "append one JSON line per request (with body) to this file")
	chunk := flag.Int("chunk", 0, "split text/tool-input deltas into chunks of at most N runes (0: one delta per block)")
	sideText := flag.String("side-text", "OK", "fixed reply text for side calls (title/topic/quota)")
	quiet := flag.Bool("quiet", false, "do not log request summaries to stderr")
	api := flag.String("api", "anthropic", "API to serve: anthropic (Messages API), openai-responses (Responses API) or gemini (Gemini API)")
	flag.Parse()

	var logw, bodyw io.Writer
	if !*quiet {
		logw = os.Stderr
	}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
			os.Exit(2)
		}
		defer f.Close()
		bodyw = f
	}
	srv, err := newServer(*api, *script, *chunk, *sideText, logw, bodyw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
		os.Exit(2)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr().String())
	os.Stdout.Sync()

	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		fmt.Fprintf(os.Stderr, "baton-modelserver: stopped; %d script replies consumed\n", srv.Consumed())
	case err := <-errc:
		if err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
			os.Exit(1)
		}
	}
}

// consumer is a scripted server of either API.
type consumer interface {
	http.Handler
	Consumed() int
}

// newServer builds the server for api ("anthropic", "openai-responses" or
// "gemini")
// from the script file at path (none when empty).
func newServer(api, path string, chunk int, sideText string, logw, bodyw io.Writer) (consumer, error) {
	switch api {
	case "anthropic", "":
		var sc modelserver.Script
		if path != "" {
			var err error
			if sc, err = modelserver.LoadScript(path); err != nil {
				return nil, err
			}
		}
		srv := modelserver.New(sc)
		srv.ChunkRunes, srv.SideText, srv.Log, srv.BodyLog = chunk, sideText, logw, bodyw
		srv.Timestamps = bodyw != nil
		return srv, nil
	case "openai-responses":
		var sc modelserver.ResponsesScript
		if path != "" {
			var err error
			if sc, err = modelserver.LoadResponsesScript(path); err != nil {
				return nil, err
			}
		}
		srv := modelserver.NewResponses(sc)
		srv.ChunkRunes, srv.SideText, srv.Log, srv.BodyLog = chunk, sideText, logw, bodyw
		srv.Timestamps = bodyw != nil
		return srv, nil
	case "gemini":
		var sc modelserver.GeminiScript
		if path != "" {
			var err error
			if sc, err = modelserver.LoadGeminiScript(path); err != nil {
				return nil, err
			}
		}
		srv := modelserver.NewGemini(sc)
		srv.ChunkRunes, srv.SideText, srv.Log, srv.BodyLog = chunk, sideText, logw, bodyw
		srv.Timestamps = bodyw != nil
		return srv, nil
	default:
		return nil, fmt.Errorf("unknown --api %q (want anthropic, openai-responses or gemini)", api)
	}
}
