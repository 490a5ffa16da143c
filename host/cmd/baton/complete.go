package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/host/internal/service"
)

// Shell completion (baton completion bash|zsh|fish) of what the verbs
// take: thread ids, pending request ids, providers and run ordinals. They
// are read from the service when one answers, else from the store opened
// read-only: a completion never starts a host, never writes to the data
// dir, gives up after completionTimeout, and never says what went wrong (a
// completion that cannot read offers nothing: its output is the shell's).

// completionTimeout bounds a completion: the shell waits for it at each
// Tab, so a service that does not answer must cost little more than a
// pause.
const completionTimeout = 2 * time.Second

// addCompletions gives the verbs' arguments and flags their completions,
// in one table. A verb or flag it names that does not exist is a mistake
// of this file, found by any run of baton.
func addCompletions(root *cobra.Command, g *globals) {
	threads := firstArg(g.completion(threadIDs))
	args := map[string]cobra.CompletionFunc{
		"show": threads, "watch": threads, "send": threads, "interrupt": threads, "cancel": threads,
		"diff": upTo(2, g.completion(threadIDs)), "rollback": threads, "switch": threads, "merge": threads, "archive": threads,
		"compare": upTo(-1, g.completion(threadIDs)),
		"approve": firstArg(g.completion(pendingRequests)), "decline": firstArg(g.completion(pendingRequests)),
	}
	for verb, f := range args {
		verbNamed(root, verb).ValidArgsFunction = f
	}
	providers, onLimit := g.completion(providerNames), g.completion(onLimitValues)
	notEnded := func(r *batonv1.Run) bool { return !statusOf(r).Terminal() }
	for _, f := range []struct {
		verb, flag string
		fn         cobra.CompletionFunc
	}{
		{"run", "thread", g.completion(threadIDs)},
		{"run", "provider", commaList(providers)},
		{"run", "on-limit", onLimit},
		{"send", "provider", providers},
		{"send", "on-limit", onLimit},
		{"send", "run", g.completion(runsOf(notEnded, false))},
		{"switch", "provider", providers},
		{"threads", "provider", providers},
		{"threads", "after", g.completion(threadIDs)},
		{"interrupt", "run", g.completion(runsOf(notEnded, false))},
		{"cancel", "run", g.completion(runsOf(func(r *batonv1.Run) bool { return statusOf(r) == domain.RunStatusQueued }, false))},
		{"diff", "run", g.completion(runsOf(func(*batonv1.Run) bool { return true }, false))},
		{"rollback", "run", g.completion(runsOf(func(*batonv1.Run) bool { return true }, true))},
	} {
		if err := verbNamed(root, f.verb).RegisterFlagCompletionFunc(f.flag, f.fn); err != nil {
			panic(fmt.Sprintf("completion of %s --%s: %v", f.verb, f.flag, err))
		}
	}
}

// verbNamed is root's verb of that name.
func verbNamed(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	panic("completion of baton " + name + ": no such verb")
}

// firstArg completes a verb's first argument only.
func firstArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

// upTo completes a verb's first n arguments (n < 0: every one) with f's
// values, less those given already.
func upTo(n int, f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if n >= 0 && len(args) >= n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		vals, dir := f(cmd, args, toComplete)
		return slices.DeleteFunc(vals, func(v cobra.Completion) bool {
			id, _, _ := strings.Cut(v, "\t")
			return slices.Contains(args, id)
		}), dir
	}
}

// commaList completes a comma-separated list of f's values (run
// --provider codex,claude): after the last comma, each value not in the
// list yet.
func commaList(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := strings.LastIndex(toComplete, ",")
		if i < 0 {
			return f(cmd, args, toComplete)
		}
		listed := toComplete[:i+1]
		vals, dir := f(cmd, args, toComplete[i+1:])
		var out []cobra.Completion
		for _, v := range vals {
			if name, _, _ := strings.Cut(v, "\t"); !slices.Contains(strings.Split(listed, ","), name) {
				out = append(out, listed+v)
			}
		}
		return out, dir
	}
}

// completer lists the values a completion offers, each with its
// description, in the order offered.
type completer func(ctx context.Context, r reader, cmd *cobra.Command, args []string) []cobra.Completion

// completion is a cobra completion of a completer: a reader found, the
// values that begin with what is typed, in the completer's order. (The
// global flags' variables, BATON_DATA and the rest, are applied by the
// root's PersistentPreRunE, which cobra's __complete runs too.)
func (g *globals) completion(list completer) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		r := g.reader(ctx)
		if r == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer r.close()
		var out []cobra.Completion
		for _, c := range list(ctx, r, cmd, args) {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

// threadIDs are the threads, in baton threads' order: "thr_…	acp · idle ·
// /src/app".
func threadIDs(ctx context.Context, r reader, _ *cobra.Command, _ []string) []cobra.Completion {
	list, err := r.threads(ctx)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, t := range listed(list, nil, 0) {
		out = append(out, cobra.CompletionWithDesc(t.GetId(), t.GetProvider()+" · "+statusWords(t)+" · "+t.GetCwd()))
	}
	return out
}

// pendingRequests are the requests waiting for an answer the provider can
// still receive, on the threads with an active run (a request is pending
// only while its run is), newest thread first: "req_…	thr_… run 2:
// permission Write allowed.txt".
func pendingRequests(ctx context.Context, r reader, _ *cobra.Command, _ []string) []cobra.Completion {
	list, err := r.threads(ctx)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, s := range listed(list, nil, 0) {
		if domain.ThreadStatus(s.GetStatus()) == domain.ThreadIdle {
			continue
		}
		t, err := r.thread(ctx, s.GetId())
		if err != nil {
			continue
		}
		for _, q := range t.GetRequests() {
			if domain.RequestStatus(q.GetStatus()) != domain.RequestStatusPending || domain.Delivery(q.GetDelivery()) != domain.DeliveryLive {
				continue
			}
			out = append(out, cobra.CompletionWithDesc(q.GetId(), strings.TrimSpace(fmt.Sprintf("%s %s: %s %s",
				t.GetId(), runName(t, q.GetRunId()), words(q.GetKind()), oneLine(q.GetTitle(), 200)))))
		}
	}
	return out
}

// providerNames are the providers a host can run: its plugins.
func providerNames(ctx context.Context, r reader, _ *cobra.Command, _ []string) []cobra.Completion {
	names, err := r.providers(ctx)
	if err != nil {
		return nil
	}
	return names
}

// onLimitValues are --on-limit's: wait, stop, and a switch to each
// provider.
func onLimitValues(ctx context.Context, r reader, cmd *cobra.Command, args []string) []cobra.Completion {
	out := []cobra.Completion{"wait", "stop"}
	for _, p := range providerNames(ctx, r, cmd, args) {
		out = append(out, "switch:"+p)
	}
	return out
}

// runsOf completes --run with the runs of the thread given as the verb's
// argument that keep takes (and 0, the baseline, for a verb that takes it):
// their ordinals ("2	completed: Write hello.txt"), or their ids where
// the flag takes an id (a string flag).
func runsOf(keep func(*batonv1.Run) bool, baseline bool) completer {
	return func(ctx context.Context, r reader, cmd *cobra.Command, args []string) []cobra.Completion {
		if len(args) == 0 {
			return nil
		}
		t, err := r.thread(ctx, args[0])
		if err != nil {
			return nil
		}
		byID := cmd.Flags().Lookup("run").Value.Type() == "string"
		var out []cobra.Completion
		if baseline && !byID {
			out = append(out, cobra.CompletionWithDesc("0", "before the first run"))
		}
		for _, run := range t.GetRuns() {
			if !keep(run) {
				continue
			}
			what := run.GetStatus() + ": " + oneLine(run.GetInput(), 60)
			if byID {
				out = append(out, cobra.CompletionWithDesc(run.GetId(), fmt.Sprintf("run %d, %s", run.GetOrdinal(), what)))
			} else {
				out = append(out, cobra.CompletionWithDesc(fmt.Sprint(run.GetOrdinal()), what))
			}
		}
		return out
	}
}

// reader is what a completion reads: a service's API, or the store.
type reader interface {
	threads(ctx context.Context) ([]*batonv1.ThreadSummary, error)
	thread(ctx context.Context, id string) (*batonv1.Thread, error)
	providers(ctx context.Context) ([]string, error)
	close()
}

// reader finds what a completion reads, by connect's rule except that
// where no service answers it opens the store read-only instead of
// embedding a host, and finds the plugins an embedded host would (so that
// providers complete before the first thread, or while another baton holds
// the store); nil when a service named with --server does not answer.
func (g *globals) reader(ctx context.Context) reader {
	if g.server != "" {
		c, err := g.dial(ctx, g.server, completionTimeout)
		if err != nil {
			return nil
		}
		return apiReader{c}
	}
	if c, err := g.local(ctx); err == nil && c != nil {
		return apiReader{c}
	}
	r := localReader{plugins: pluginhost.New(pluginhost.Config{Dirs: append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...)})}
	if s, err := openStoreReadOnly(g.data); err == nil {
		r.s = s
	}
	return r
}

// apiReader reads a service.
type apiReader struct{ c *client }

func (a apiReader) threads(ctx context.Context) ([]*batonv1.ThreadSummary, error) {
	var list []*batonv1.ThreadSummary
	token := ""
	for {
		resp, err := a.c.ListThreads(ctx, &batonv1.ListThreadsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		list = append(list, resp.GetThreads()...)
		if token = resp.GetNextPageToken(); token == "" {
			return list, nil
		}
	}
}

func (a apiReader) thread(ctx context.Context, id string) (*batonv1.Thread, error) {
	return a.c.thread(ctx, id)
}

// providers are the service's plugins that start (it keeps them running
// for its threads once asked).
func (a apiReader) providers(ctx context.Context) ([]string, error) {
	resp, err := a.c.ListPlugins(ctx, &batonv1.ListPluginsRequest{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range resp.GetPlugins() {
		if p.GetNotes()["error"] == "" {
			names = append(names, p.GetName())
		}
	}
	return names, nil
}

func (a apiReader) close() { a.c.close() }

// localReader reads the store, opened read-only (nil: there is none, or
// another baton holds it), and the plugin directories an embedded host
// would use. What it reads it gives as the API's messages, as the service
// would.
type localReader struct {
	s       *eventlog.Store
	plugins *pluginhost.Manager
}

// errNoStore is a completion's: it reads no threads where it could not
// open the store.
var errNoStore = errors.New("no store to read")

func (r localReader) threads(context.Context) ([]*batonv1.ThreadSummary, error) {
	if r.s == nil {
		return nil, errNoStore
	}
	list, err := orchestrator.ReadThreads(r.s)
	if err != nil {
		return nil, err
	}
	out := make([]*batonv1.ThreadSummary, len(list))
	for i, s := range list {
		out[i] = service.SummaryMessage(s)
	}
	return out, nil
}

func (r localReader) thread(_ context.Context, id string) (*batonv1.Thread, error) {
	if r.s == nil {
		return nil, errNoStore
	}
	t, err := orchestrator.ReadThread(r.s, id)
	if err != nil {
		return nil, err
	}
	return service.ThreadMessage(t), nil
}

// providers are the plugins a host would run: found, with their checksum
// recorded (none is started).
func (r localReader) providers(context.Context) ([]string, error) {
	return slices.DeleteFunc(r.plugins.Installed(), func(name string) bool {
		_, _, err := r.plugins.Find(name)
		return err != nil
	}), nil
}

func (r localReader) close() {
	if r.s != nil {
		r.s.Close()
	}
}
