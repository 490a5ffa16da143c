package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/worktree"
)

// baton run --provider a,b,c: one thread per provider, all created first,
// then followed in parallel, each as baton run follows one thread, its
// lines printed whole and begun with the thread's provider and short id.

// providerList is --provider's names. More than one is a thread each: not
// with --thread (a thread has one provider), a --script (its steps are
// one thread's), --approve ask (one terminal cannot answer several
// threads at once) or --provider-command (one command cannot be every
// provider's).
func (f *runFlags) providerList(approve string) ([]string, error) {
	names := strings.Split(f.provider, ",")
	if len(names) == 1 {
		return names, nil
	}
	for i, name := range names {
		if name = strings.TrimSpace(name); name == "" {
			return nil, usagef("run: --provider %q: an empty provider name in the list", f.provider)
		}
		if slices.Contains(names[:i], name) {
			return nil, usagef("run: --provider %q names %s twice; give each provider once", f.provider, name)
		}
		names[i] = name
	}
	switch {
	case f.thread != "":
		return nil, usagef("run: --provider with several providers makes a thread each; a thread that goes on (--thread) has one")
	case f.script != "":
		return nil, usagef("run: --script runs one thread's steps; give one provider")
	case domain.ApprovalPolicy(approve) == domain.ApproveAsk:
		return nil, usagef("run: --approve ask cannot ask for several threads at once; give --approve accept or decline with several providers")
	case f.command != "":
		return nil, usagef("run: --provider-command is one provider's; with several providers each runs its usual command")
	}
	return names, nil
}

// runMany is baton run on several providers: it creates a thread on each
// (every one before any run starts, so that each worktree starts at the
// same base), then follows them all at once. The exit is 130 when one was
// interrupted, 1 when one of their runs did not complete, else 0.
func runMany(ctx context.Context, g *globals, c *client, f *runFlags, o runOptions, interruptReq <-chan struct{}) error {
	for _, p := range o.providers {
		if defaultCommand(p) == nil {
			return noCommand(ctx, "run", c, p)
		}
		if err := checkNewThread(ctx, c, p, o); err != nil {
			return err
		}
	}
	if err := checkBranches(ctx, f, o); err != nil {
		return err
	}
	idgen := ids.New()
	threads := make([]string, 0, len(o.providers))
	for _, p := range o.providers {
		wt, err := f.worktree.options(p, true)
		if err != nil {
			return err
		}
		id, err := newThread(ctx, c, idgen, f, o, p, commandOfArgv(defaultCommand(p)), wt)
		if err != nil {
			return madeBefore(err, o.providers, threads)
		}
		threads = append(threads, id)
	}
	return followAll(ctx, g, c, idgen, f, o, threads, interruptReq)
}

// followAll follows the threads (made on o.providers, in order) at once,
// each as baton run follows one, its lines written whole and begun with
// its provider and short id; Ctrl-C interrupts them all.
func followAll(ctx context.Context, g *globals, c *client, idgen *ids.Allocator, f *runFlags, o runOptions, threads []string,
	interruptReq <-chan struct{}) error {
	var stdoutMu, stderrMu sync.Mutex
	interrupts := make([]chan struct{}, len(threads))
	errs := make([]error, len(threads))
	var wg sync.WaitGroup
	for i, id := range threads {
		prefix := "[" + o.providers[i] + " " + domain.ShortID(id) + "] "
		out := &lineWriter{mu: &stdoutMu, w: g.stdout, prefix: prefix}
		if f.json {
			out.prefix = "" // each JSON line names its thread
		}
		errOut := &lineWriter{mu: &stderrMu, w: g.stderr, prefix: prefix}
		tg := *g
		tg.stdout, tg.stderr = out, errOut
		interrupts[i] = make(chan struct{}, 1)
		wg.Go(func() {
			defer out.Flush()
			defer errOut.Flush()
			errs[i] = followRuns(ctx, &tg, c, idgen, f, o, id, true, interrupts[i])
			var ee *exitError
			if errors.As(errs[i], &ee) && ee.msg != "" {
				fmt.Fprintf(errOut, "baton: %s\n", ee.msg)
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-interruptReq:
		for _, ch := range interrupts {
			ch <- struct{}{}
		}
		<-done
	case <-done:
	}
	return manyExit(errs)
}

// checkBranches checks, before any thread is made, what the host would
// refuse a thread of the list for: a directory not in a repository, a
// base that does not resolve, a branch NAME-<provider> that exists (the
// host checks each again as it makes the thread). --cwd is on this
// machine, where the repository is.
func checkBranches(ctx context.Context, f *runFlags, o runOptions) error {
	if !f.worktree.on {
		return nil
	}
	src, err := worktree.Inspect(ctx, o.cwd, f.worktree.base)
	if err != nil {
		return usagef("run: --worktree: %v", err)
	}
	if f.worktree.branch == "" {
		return nil // baton/<short thread id>: new with each thread
	}
	for _, p := range o.providers {
		if err := worktree.CheckBranch(ctx, src.Root, f.worktree.branch+"-"+p); err != nil {
			return usagef("run: --branch: %v", err)
		}
	}
	return nil
}

// madeBefore is the exit of a run on several providers whose thread on
// providers[len(made)] could not be created: the host's refusal, and the
// threads made before it, which stay (with how to put them away).
func madeBefore(err error, providers, made []string) error {
	if len(made) == 0 {
		return err
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		return err
	}
	var names []string
	for i, id := range made {
		names = append(names, id+" ("+providers[i]+")")
	}
	return &exitError{code: ee.code, msg: fmt.Sprintf("%s: %s; made before it, and not run: %s (put them away with baton archive)",
		providers[len(made)], ee.msg, strings.Join(names, ", "))}
}

// manyExit is the exit of several threads' runs, from each one's: 130
// when one was interrupted, 1 when one failed, else 0. Each thread said
// why already.
func manyExit(errs []error) error {
	code := exitOK
	for _, err := range errs {
		var ee *exitError
		switch {
		case err == nil:
		case errors.As(err, &ee) && ee.code == exitInterrupted:
			return silent(exitInterrupted)
		default:
			code = exitFailed
		}
	}
	if code != exitOK {
		return silent(code)
	}
	return nil
}

// lineWriter writes whole lines to w, each begun with prefix, holding mu
// (shared by the writers of one w) while it does: several threads' lines
// never mix. A partial line waits for its end, or for Flush.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	end := bytes.LastIndexByte(l.buf, '\n')
	if end < 0 {
		return len(b), nil
	}
	err := l.emit(l.buf[:end+1])
	l.buf = append(l.buf[:0], l.buf[end+1:]...)
	return len(b), err
}

// Flush writes a partial line left, ended.
func (l *lineWriter) Flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.emit(append(l.buf, '\n'))
	l.buf = l.buf[:0]
	return err
}

// emit writes lines (each ended with a newline), each after the prefix,
// in one write.
func (l *lineWriter) emit(lines []byte) error {
	var out bytes.Buffer
	for line := range bytes.Lines(lines) {
		out.WriteString(l.prefix)
		out.Write(line)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(out.Bytes())
	return err
}
