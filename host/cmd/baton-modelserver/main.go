// Command baton-modelserver serves a scripted Anthropic Messages API on a
// local address, for driving real agents (e.g. Claude Code) in tests and
// transcript recordings without a real model.
//
//	baton-modelserver --script replies.json [--addr 127.0.0.1:0] [--log requests.jsonl]
//
// The first line on stdout is "listening on http://HOST:PORT". Request
// summaries go to stderr. It serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
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
	flag.Parse()

	var sc modelserver.Script
	if *script != "" {
		var err error
		sc, err = modelserver.LoadScript(*script)
		if err != nil {
			fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
			os.Exit(2)
		}
	}
	srv := modelserver.New(sc)
	srv.ChunkRunes = *chunk
	srv.SideText = *sideText
	if !*quiet {
		srv.Log = os.Stderr
	}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "baton-modelserver:", err)
			os.Exit(2)
		}
		defer f.Close()
		srv.BodyLog = f
		srv.Timestamps = true
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
