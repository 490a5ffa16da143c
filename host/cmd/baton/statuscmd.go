package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

func statusCommand(g *globals) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Say whether a service answers, and what it runs",
		Long: `Status asks the service named by --server, or the one on the data directory's
socket (DATA/baton.sock), what it is: its version and process, since when it
serves, where it listens, its active threads (a run going on or waiting, or a
provider session open) and its plugins (those it runs with their process).
It never embeds a host: with no service answering it says so and exits 1.`,
		Example: `  baton status
  baton status --server tcp://127.0.0.1:7077 --token-file ~/.config/baton/token
  baton status --json | jq .activeThreads`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dialService(cmd.Context(), "status", " (start one with baton serve)")
			if err != nil {
				return err
			}
			defer c.close()
			st, err := c.GetStatus(cmd.Context(), &batonv1.GetStatusRequest{})
			if err != nil {
				return rpcError("status", err)
			}
			if jsonOut {
				b, _ := json.Marshal(statusJSON(st)) // plain values always encode
				fmt.Fprintln(g.stdout, string(b))
				return nil
			}
			printStatus(g.stdout, st, time.Now(), time.Local)
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the status as one JSON object")
	return c
}

// dialService reaches the service for a verb that never embeds a host
// (status, ui), or says in words why it cannot: noService follows "no
// service answers on TARGET".
func (g *globals) dialService(ctx context.Context, verb, noService string) (*client, error) {
	target := g.server
	if target == "" {
		target = filepath.Join(g.data, service.SocketName)
	}
	c, err := g.dial(ctx, target, serverCheckTimeout)
	var silent *noAnswer
	switch {
	case errors.Is(err, service.ErrRefused):
		return nil, failf(exitFailed, "server %s %s", target, refused)
	case errors.Is(err, service.ErrNotServing):
		return nil, failf(exitFailed, "the service on %s is stopping: it is ending its runs", target)
	case errors.As(err, &silent):
		return nil, failf(exitFailed, "no service answers on %s%s", target, noService)
	case err != nil:
		return nil, failf(exitFailed, "%s: %v", verb, err)
	}
	return c, nil
}

// serviceStatus is the status as --json prints it.
type serviceStatus struct {
	Version       string           `json:"version"`
	PID           int              `json:"pid"`
	DataDir       string           `json:"dataDir"`
	StartedAt     time.Time        `json:"startedAt"`
	UptimeSeconds int64            `json:"uptimeSeconds"`
	Listeners     []listenerStatus `json:"listeners"`
	ActiveThreads []summaryJSON    `json:"activeThreads"`
	Plugins       []pluginStatus   `json:"plugins"`
	Runtime       runtimeStatus    `json:"runtime"`
	Store         storeStatus      `json:"store"`
}

// storeStatus is where the event log is kept: "pebble", or "jetstream"
// with the shared log's servers, its installation, this host's name, its
// role (coordinator or host), the host that coordinates the log now, and
// when this host took its own host lease.
type storeStatus struct {
	Kind         string     `json:"kind"`
	Servers      []string   `json:"servers,omitempty"`
	Installation string     `json:"installation,omitempty"`
	Host         string     `json:"host,omitempty"`
	Role         string     `json:"role,omitempty"`
	Coordinator  string     `json:"coordinator,omitempty"`
	LeaseSince   *time.Time `json:"leaseSince,omitempty"`
}

type runtimeStatus struct {
	Goroutines    int    `json:"goroutines"`
	HeapBytes     uint64 `json:"heapBytes"`
	ResidentBytes uint64 `json:"residentBytes,omitempty"`
	OpenFiles     int    `json:"openFiles"`
}

type listenerStatus struct {
	Address string `json:"address"`
	TLS     bool   `json:"tls,omitempty"`
	Token   bool   `json:"token,omitempty"`
}

type pluginStatus struct {
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Version string `json:"version,omitempty"`
}

func statusJSON(st *batonv1.ServiceStatus) serviceStatus {
	out := serviceStatus{Version: st.GetVersion(), PID: int(st.GetPid()), DataDir: st.GetDataDir(), StartedAt: st.GetStartedAt().AsTime(),
		UptimeSeconds: int64(st.GetUptime().AsDuration() / time.Second), Listeners: []listenerStatus{},
		ActiveThreads: []summaryJSON{}, Plugins: []pluginStatus{}}
	for _, l := range st.GetListeners() {
		out.Listeners = append(out.Listeners, listenerStatus{Address: l.GetAddress(), TLS: l.GetTls(), Token: l.GetToken()})
	}
	for _, t := range st.GetActiveThreads() {
		out.ActiveThreads = append(out.ActiveThreads, summaryJSONOf(t))
	}
	for _, p := range st.GetPlugins() {
		out.Plugins = append(out.Plugins, pluginStatus{Name: p.GetName(), Path: p.GetPath(), PID: int(p.GetPid()), Version: p.GetVersion()})
	}
	sst := st.GetStore()
	out.Store = storeStatus{Kind: sst.GetKind(), Servers: sst.GetServers(), Installation: sst.GetInstallation(), Host: sst.GetHost(),
		Role: sst.GetRole(), Coordinator: sst.GetCoordinator()}
	if sst.GetLeaseSince() != nil {
		since := sst.GetLeaseSince().AsTime()
		out.Store.LeaseSince = &since
	}
	rt := st.GetRuntime()
	out.Runtime = runtimeStatus{Goroutines: int(rt.GetGoroutines()), HeapBytes: rt.GetHeapBytes(), ResidentBytes: rt.GetResidentBytes(),
		OpenFiles: int(rt.GetOpenFiles())}
	return out
}

// storeRole says, for people, which host this is on a shared log and
// which one coordinates it: every host writes the threads it owns (since
// it took its own lease); the coordinator also takes over lost hosts'
// threads and delivers the notifications.
func storeRole(sst *batonv1.StoreStatus, now time.Time, loc *time.Location) string {
	own := fmt.Sprintf("host %s writes its own threads (lease since %s)", sst.GetHost(), clockTime(sst.GetLeaseSince().AsTime(), now, loc))
	switch c := sst.GetCoordinator(); {
	case sst.GetRole() == "coordinator":
		return own + " and coordinates the installation"
	case c == "":
		return own + "; no host coordinates it now (the installation's lease is free)"
	default:
		return own + "; host " + c + " coordinates it"
	}
}

// printStatus is the status for people, instants at now in loc:
//
//	service    baton 0.1.0, pid 1234, up 2h13m (since 14:05)
//	data       /home/me/.local/share/baton
//	store      jetstream nats://10.0.0.1:4222,..., installation baton: host a writes it (lease since 14:05)
//	listening  unix:///home/me/.local/share/baton/baton.sock
//	           tcp://127.0.0.1:7077 (token)
//	threads    1 active
//	           thr_1  acp  running, 2 runs  /src/app
//	plugins    acp 0.1.0 (pid 2345), claude, codex, cursor, opencode
//	runtime    41 goroutines, heap 6.2 MiB, 38.5 MiB resident, 23 open files
func printStatus(w io.Writer, st *batonv1.ServiceStatus, now time.Time, loc *time.Location) {
	fmt.Fprintf(w, "service    baton %s, pid %d, up %s (since %s)\n", st.GetVersion(), st.GetPid(),
		fmtDuration(st.GetUptime().AsDuration()), clockTime(st.GetStartedAt().AsTime(), now, loc))
	fmt.Fprintf(w, "data       %s\n", st.GetDataDir())
	if sst := st.GetStore(); sst.GetKind() == "jetstream" {
		fmt.Fprintf(w, "store      jetstream %s, installation %s: %s\n", strings.Join(sst.GetServers(), ","),
			sst.GetInstallation(), storeRole(sst, now, loc))
	}
	for i, l := range st.GetListeners() {
		head := "listening "
		if i > 0 {
			head = "          "
		}
		var how []string
		if l.GetTls() {
			how = append(how, "TLS")
		}
		if l.GetToken() {
			how = append(how, "token")
		}
		note := ""
		if len(how) > 0 {
			note = " (" + strings.Join(how, ", ") + ")"
		}
		fmt.Fprintf(w, "%s %s%s\n", head, l.GetAddress(), note)
	}
	fmt.Fprintf(w, "threads    %d active\n", len(st.GetActiveThreads()))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range st.GetActiveThreads() {
		what := t.GetStatus()
		if domain.ThreadStatus(t.GetStatus()) == domain.ThreadIdle {
			what += ", provider session open" // live, no run active: its session is
		}
		what += ", " + plural(int(t.GetRuns()), "run")
		if t.GetQueued() > 0 {
			what += fmt.Sprintf(" (%d queued)", t.GetQueued())
		}
		fmt.Fprintf(tw, "           %s\t%s\t%s\t%s\n", t.GetId(), t.GetProvider(), what, t.GetCwd())
	}
	tw.Flush()
	var plugins []string
	for _, p := range st.GetPlugins() {
		name := p.GetName()
		if p.GetPid() != 0 {
			name += fmt.Sprintf(" %s (pid %d)", p.GetVersion(), p.GetPid())
		}
		plugins = append(plugins, name)
	}
	if len(plugins) == 0 {
		plugins = []string{"none installed"}
	}
	fmt.Fprintf(w, "plugins    %s\n", strings.Join(plugins, ", "))
	if rt := st.GetRuntime(); rt != nil {
		line := fmt.Sprintf("runtime    %s, heap %s", plural(int(rt.GetGoroutines()), "goroutine"), fmtBytes(rt.GetHeapBytes()))
		if rt.GetResidentBytes() > 0 {
			line += ", " + fmtBytes(rt.GetResidentBytes()) + " resident"
		}
		if rt.GetOpenFiles() >= 0 {
			line += ", " + plural(int(rt.GetOpenFiles()), "open file")
		}
		fmt.Fprintln(w, line)
	}
}

// fmtBytes is a size as people read it: 812 B, 6.2 KiB, 38.5 MiB, 1.2 GiB.
func fmtBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for ; v >= unit && i < 3; i++ {
		v /= unit
	}
	return fmt.Sprintf("%.1f %s", v, [...]string{"KiB", "MiB", "GiB", "TiB"}[i])
}
