//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/browsertest"
)

// The dashboard in a real browser: `baton serve` with a loopback TCP
// listener, the real acp plugin and replay peers, headless Chromium signed
// in with the one-time code `baton ui` prints. The tests find what they
// check by the DOM contract the UI keeps (data-thread-id, data-run-status,
// data-request-id, data-action, ...; issue 29), never by layout or text
// styling. Every page a test opens must write no error or warning to the
// console (browsertest fails the test otherwise), and a failed test saves
// each tab's page.

// dashboard is a `baton serve` whose pages a browser reaches.
type dashboard struct {
	*batonService
	origin string // http://127.0.0.1:PORT, from the sign-in URL
}

// startDashboard starts `baton serve` with a loopback TCP listener.
func startDashboard(t testing.TB) *dashboard {
	t.Helper()
	s := startService(t, privateDir(t), "--listen", "tcp://127.0.0.1:0")
	return &dashboard{batonService: s}
}

// loginURL is the URL `baton ui [THREAD]` prints: it signs a browser in
// once, and opens the list, or the thread's page.
func (d *dashboard) loginURL(t testing.TB, thread ...string) string {
	t.Helper()
	out, errOut, code := baton(t, append([]string{"ui", "--no-open", "--data", d.data}, thread...)...)
	if code != exitOK {
		t.Fatalf("baton ui: exit %d\n%s\n%s", code, out, errOut)
	}
	u := regexp.MustCompile(`http://\S+/login\?\S+`).FindString(out)
	if u == "" {
		t.Fatalf("baton ui printed no sign-in URL:\n%s\n%s", out, errOut)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("baton ui's URL %s: %v", u, err)
	}
	d.origin = p.Scheme + "://" + p.Host
	return u
}

// signIn signs tab in and waits until its page follows the service live:
// the list, or the thread's page.
func (d *dashboard) signIn(t testing.TB, tab *browsertest.Tab, thread ...string) {
	t.Helper()
	tab.Go(d.loginURL(t, thread...))
	if len(thread) > 0 {
		tab.Wait("the thread's page", fmt.Sprintf(`[data-thread-page=%q]`, thread[0]))
	}
	tab.Wait("a live connection", `[data-role="connection"][data-live="true"]`)
}

// page is the URL of a page of the dashboard.
func (d *dashboard) page(path string) string { return d.origin + path }

// replayThread creates a thread in cwd replaying transcript, its requests
// answered by approval, the peer given extra arguments.
func replayThread(t *testing.T, c batonv1.BatonClient, cwd, transcript, approval string, extra ...string) string {
	t.Helper()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath(transcript), "--speed", "0"}
	r, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: cwd, ApprovalPolicy: approval,
		ProviderCommand: &batonv1.ProviderCommand{Argv: append(argv, extra...)}})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	return r.GetThreadId()
}

// sendText sends text to a thread through the API.
func sendText(t *testing.T, c batonv1.BatonClient, thread, text string) {
	t.Helper()
	if _, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: thread, Text: text}); err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
}

// Selectors of the DOM contract.
func threadRow(id string) string  { return fmt.Sprintf(`[data-thread-id=%q]`, id) }
func threadPage(id string) string { return fmt.Sprintf(`[data-thread-page=%q]`, id) }

// assistantText is JavaScript: the page's assistant text, all messages
// joined.
const assistantText = `[...document.querySelectorAll('[data-role="assistant-text"]')].map(e => e.textContent).join("\n")`

// A replayed thread appears on the list as it is created, without a
// reload; its link opens its page, and the assistant's text streams in
// there while the page is open, as the provider sends it.
func TestBrowserThreadStreams(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	tab := browsertest.Start(t).NewTab("user")
	d.signIn(t, tab)

	id := replayThread(t, c, t.TempDir(), "acp/simple.ndjson", "decline")
	tab.Wait("the new thread on the list", threadRow(id))
	tab.Click("the thread's link", threadRow(id)+fmt.Sprintf(` a[href="/threads/%s"]`, id))
	tab.Wait("the thread's page", threadPage(id))
	// The same document and the same page from here on: what follows
	// arrives by the subscription and is added to the page, which is
	// neither loaded again nor rebuilt.
	if _, err := browsertest.Eval[bool](tab, fmt.Sprintf(`(window.batonTestMark = document.querySelector(%q), true)`, threadPage(id))); err != nil {
		t.Fatal(err)
	}

	sendText(t, c, id, lines(t, "acp/simple.messages")[0])
	tab.WaitFor("the assistant's answer", assistantText+`.includes("Hello from the replay agent.")`)
	tab.Wait("the run completed", `[data-run-id][data-run-status="completed"]`)
	if kept, err := browsertest.Eval[bool](tab, `window.batonTestMark !== undefined && window.batonTestMark.isConnected`); err != nil || !kept {
		t.Errorf("the thread's page was loaded again or rebuilt to show the answer (%v); want it streamed into the open page", err)
	}

	tab.Go(d.page("/"))
	tab.Wait("the thread done on the list", threadRow(id)+`[data-state="done"]`)
}

// An approval answered on the page reaches the provider as exactly the
// frame accepting it: the replay peer expects the recorded accept
// (optionId "allow") and ends the run with a mismatch on any other.
func TestBrowserApproval(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	cwd := t.TempDir()
	id := replayThread(t, c, cwd, "acp/approval_accept.ndjson", "ask")
	tab := browsertest.Start(t).NewTab("thread")
	d.signIn(t, tab, id)

	tab.Type("the composer", `textarea[data-role="composer"]`, "Write allowed.txt")
	tab.Click("send", `button[data-action="send"]`)
	tab.Click("accept on the pending request", `[data-request-id] button[data-decision="accept"]`)
	tab.WaitFor("the run's end", `document.querySelector('[data-run-id]:not([data-run-status="queued"]):not([data-run-status="starting"]):not([data-run-status="running"]):not([data-run-status="waiting"])')`)

	p := thread(t, c, id)
	run := p["runs"].([]any)[0].(map[string]any)
	if run["status"] != "completed" {
		t.Fatalf("the run ended %v (%v); want completed: the peer got another frame than the accept", run["status"], run["failure"])
	}
	var answers []string
	for _, r := range p["requests"].([]any) {
		r := r.(map[string]any)
		answers = append(answers, fmt.Sprintf("%v %v", r["status"], r["decision"]))
	}
	if got := strings.Join(answers, ", "); got != "resolved accept" {
		t.Errorf("the requests: %s; want one, resolved accept", got)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "allowed.txt")); err != nil || string(b) != "written with permission\n" {
		t.Errorf("allowed.txt: %q, %v; want what the accepted write wrote", b, err)
	}
	tab.Wait("the request answered on the page", `[data-run-id][data-run-status="completed"]`)
	if n, _ := browsertest.Eval[int](tab, `document.querySelectorAll('[data-request-id] button[data-decision]').length`); n != 0 {
		t.Errorf("%d answer buttons still shown after the request was resolved", n)
	}
}

// fakeNotifications stands in for the browser's notifications in every
// page the tab opens: permission granted, the page never focused (so that
// it notifies), the user's choice to be notified stored, and each
// notification kept in window.batonNotes as "title | body".
const fakeNotifications = `
window.batonNotes = [];
window.Notification = class {
	constructor(title, opts) { window.batonNotes.push(title + " | " + ((opts && opts.body) || "")); }
	static get permission() { return "granted"; }
	static requestPermission() { return Promise.resolve("granted"); }
};
document.hasFocus = () => false;
try { localStorage.setItem("baton.notifications", "on"); } catch (e) {}
`

// With notifications turned on, the list raises one when a thread comes
// to need its user and one when its run ends, each naming the thread by
// its title, and no other.
func TestBrowserNotifications(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	tab := browsertest.Start(t).NewTab("list")
	// The script runs in each page the tab opens from now on, before the
	// page's own.
	if _, err := chromedp.Call(tab.Ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: fakeNotifications}); err != nil {
		t.Fatal(err)
	}
	d.signIn(t, tab)
	id := replayThread(t, c, t.TempDir(), "acp/approval_accept.ndjson", "ask")
	tab.Wait("the new thread on the list", threadRow(id))
	sendText(t, c, id, "Write allowed.txt")
	tab.Wait("the thread needing its user", threadRow(id)+`[data-state="needs-you"]`)
	tab.WaitFor("the request's notification", `window.batonNotes.length >= 1`)
	p := thread(t, c, id)
	req := p["requests"].([]any)[0].(map[string]any)["id"].(string)
	if _, err := c.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: req, Decision: "accept"}); err != nil {
		t.Fatal(err)
	}
	tab.Wait("the thread done", threadRow(id)+`[data-state="done"]`)
	tab.WaitFor("the run's notification", `window.batonNotes.length >= 2`)
	notes, err := browsertest.Eval[[]string](tab, `window.batonNotes`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Write allowed.txt needs you | A request waits for your answer.", "Write allowed.txt: run completed | Run 1 ended."}
	if d := cmp.Diff(want, notes); d != "" {
		t.Errorf("the notifications (-want +got):\n%s", d)
	}
}

// Interrupt on the page stops the active run: the provider gets its
// cancel (the replay peer expects exactly that frame after the prompt, and
// fails the run on any other), and the run ends interrupted on the page.
// A list open in another tab shows the thread working, then done.
func TestBrowserInterrupt(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	id := replayThread(t, c, t.TempDir(), "acp/turn_interrupt.ndjson", "decline")
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	b := browsertest.Start(t)
	tab := b.NewTab("thread")
	d.signIn(t, tab, id)
	list := b.NewTab("list")
	d.signIn(t, list)
	tab.Type("the composer", `textarea[data-role="composer"]`, "Write a very long essay about rivers.")
	tab.Click("send", `button[data-action="send"]`)
	until(t, ev, "the prompt sent to the provider", ofType("provider.turn.bound"))
	list.Wait("the thread working on the list", threadRow(id)+`[data-state="working"]`)
	tab.Click("interrupt", `button[data-action="interrupt"]:not([disabled])`)
	tab.Wait("the run interrupted on the page", `[data-run-id][data-run-status="interrupted"]`)
	list.Wait("the thread done on the list (interrupted by its user, not failed)", threadRow(id)+`[data-state="done"]`)
	run := thread(t, c, id)["runs"].([]any)[0].(map[string]any)
	if run["status"] != "interrupted" || run["stopReason"] != "cancelled" {
		t.Errorf("the run: %v, stop reason %v, failure %v; want interrupted, cancelled by the provider", run["status"], run["stopReason"], run["failure"])
	}
}

// gitRepo makes a repository in a new dir named name whose README is
// committed, as the recorded transcripts' workspace was.
func gitRepo(t *testing.T, name string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# Replay workspace\n\nA throwaway repository for recording transcripts.\n"), 0o644)
	gitIn(t, ws, "init", "-q")
	gitIn(t, ws, "add", "README.md")
	gitIn(t, ws, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init")
	return ws
}

// rollbackThread is a thread of three completed runs in a repository: run
// 1 writes a.txt, run 2 changes it and writes sub/b.txt, run 3 writes
// c.txt. It returns the thread and its runs' checkpoints, by run ordinal.
func rollbackThread(t *testing.T, c batonv1.BatonClient, ws string) (id string, checkpoints map[int]string) {
	t.Helper()
	id = replayThread(t, c, ws, "acp/thread_rollback.ndjson", "accept", "--state", filepath.Join(t.TempDir(), "cursor"))
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	for _, m := range []string{"Write a.txt saying one", "Add a line to a.txt and write sub/b.txt", "Write c.txt"} {
		sendText(t, c, id, m)
	}
	for range 3 {
		until(t, ev, "a run's end", ofType("run.ended"))
	}
	checkpoints = map[int]string{}
	for _, cp := range thread(t, c, id)["checkpoints"].([]any) {
		cp := cp.(map[string]any)
		if n, _ := cp["runOrdinal"].(float64); n > 0 {
			checkpoints[int(n)], _ = cp["id"].(string)
		}
	}
	if len(checkpoints) != 3 {
		t.Fatalf("want a checkpoint of each of the 3 runs in %v", thread(t, c, id)["checkpoints"])
	}
	return id, checkpoints
}

// files reads the named files of dir; a missing one is "(none)".
func files(dir string, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, os.ErrNotExist) {
			data = []byte("(none)\n")
		}
		fmt.Fprintf(&b, "%s: %s", n, data)
	}
	return b.String()
}

// A rollback asked for on the page waits for its confirmation, then puts
// the repository's files back as they were after the checkpoint's run, and
// the later runs show rolled back.
func TestBrowserRollback(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	ws := gitRepo(t, "repo")
	id, cps := rollbackThread(t, c, ws)
	before := files(ws, "a.txt", "sub/b.txt", "c.txt")
	if want := "a.txt: one\ntwo\nsub/b.txt: bee\nc.txt: sea\n"; before != want {
		t.Fatalf("the files after three runs:\n%s\nwant\n%s", before, want)
	}
	tab := browsertest.Start(t).NewTab("thread")
	d.signIn(t, tab, id)

	row := fmt.Sprintf(`[data-checkpoint-id=%q]`, cps[1])
	tab.Click("run 1's rollback", row+` button[data-action="rollback"]`)
	tab.Wait("the confirmation", `button[data-action="confirm-rollback"]`)
	if now := files(ws, "a.txt", "sub/b.txt", "c.txt"); now != before {
		t.Fatalf("the files changed before the rollback was confirmed:\n%s", now)
	}
	tab.Click("confirm", `button[data-action="confirm-rollback"]`)
	tab.WaitFor("runs 2 and 3 rolled back", `document.querySelectorAll('[data-run-status="rolled_back"]').length === 2`)
	if got, want := files(ws, "a.txt", "sub/b.txt", "c.txt"), "a.txt: one\nsub/b.txt: (none)\nc.txt: (none)\n"; got != want {
		t.Errorf("the files after the rollback to run 1:\n%s\nwant\n%s", got, want)
	}
}

// A second tab of the same browser is signed in by the first one's cookie,
// and sees what the first one does as it happens: a message sent from the
// first tab's composer, its run and its answer.
func TestBrowserSecondTab(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	id := replayThread(t, c, t.TempDir(), "acp/simple.ndjson", "decline")
	b := browsertest.Start(t)
	first, second, list := b.NewTab("first"), b.NewTab("second"), b.NewTab("list")
	d.signIn(t, first, id)
	second.Go(d.page("/threads/" + id))
	second.Wait("the thread's page, by the first tab's cookie", threadPage(id))
	second.Wait("a live connection", `[data-role="connection"][data-live="true"]`)
	list.Go(d.page("/"))
	list.Wait("the thread on the list", threadRow(id))

	first.Type("the composer", `textarea[data-role="composer"]`, lines(t, "acp/simple.messages")[0])
	first.Click("send", `button[data-action="send"]`)
	second.WaitFor("the first tab's message answered", assistantText+`.includes("Hello from the replay agent.")`)
	second.Wait("the run completed", `[data-run-id][data-run-status="completed"]`)
	list.Wait("the thread done on the list", threadRow(id)+`[data-state="done"]`)
}

// A browser without the session cookie gets nothing: no list, no thread,
// no plugin, only a page saying how to sign in, and the API answers
// unauthenticated. A signed-in page holds nothing that signs in. Signing
// out ends a session: the open page's calls are refused from then on.
func TestBrowserWithoutSession(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	id := replayThread(t, c, t.TempDir(), "acp/simple.ndjson", "decline")
	b := browsertest.Start(t)
	d.loginURL(t) // the origin; the code is never used

	stranger := b.NewPrivateTab("stranger")
	stranger.IgnoreConsole() // the browser reports each 401 as an error
	shownNothing(t, stranger, d, id)
	if got := apiCall(t, "", d.page("/baton.v1.Baton/ListThreads"), "{}"); !strings.HasPrefix(got, "401 ") || !strings.Contains(got, `"unauthenticated"`) {
		t.Errorf("ListThreads without a cookie answered %s; want 401 unauthenticated", got)
	}

	user := b.NewTab("user")
	login := d.loginURL(t)
	user.Go(login)
	user.Wait("the thread on the list", threadRow(id))
	// Signed in, the page holds nothing that signs in: the code is gone
	// from its address, the cookie is out of its scripts' reach, and the
	// service's token is nowhere in it.
	token, err := os.ReadFile(filepath.Join(d.data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	code := login[strings.Index(login, "code=")+len("code="):]
	seen, err := browsertest.Eval[string](user, `location.href + "\n" + document.cookie + "\n" + document.documentElement.outerHTML`)
	if err != nil {
		t.Fatal(err)
	}
	if href, cookie, _ := strings.Cut(seen, "\n"); href != d.page("/") || !strings.HasPrefix(cookie, "\n") ||
		strings.Contains(seen, code) || strings.Contains(seen, strings.TrimSpace(string(token))) {
		t.Errorf("the signed-in page's address %q, cookie readable by its scripts %q; want %s, none, and neither the code nor the token in it",
			href, strings.SplitN(cookie, "\n", 2)[0], d.page("/"))
	}
	user.Click("sign out", `button[data-action="sign-out"]`)
	user.WaitFor("the list gone", `document.querySelector('[data-thread-id]') === null`)
	// The page that was signed in is still loaded: its calls are refused.
	got, err := browsertest.Eval[string](user, `fetch("/baton.v1.Baton/ListThreads", {method: "POST",
		headers: {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}, body: "{}"}).then(async r => r.status + " " + await r.text())`)
	if err != nil || !strings.HasPrefix(got, "401 ") || !strings.Contains(got, `"unauthenticated"`) || strings.Contains(got, id) {
		t.Errorf("ListThreads from the page after sign-out answered %q, %v; want 401 unauthenticated", got, err)
	}
	user.IgnoreConsole() // the browser reports that refusal as an error
	shownNothing(t, user, d, id)
}

// shownNothing checks that tab, signed in to nothing, is shown nothing of
// the service on any page.
func shownNothing(t *testing.T, tab *browsertest.Tab, d *dashboard, thread string) {
	t.Helper()
	for _, path := range []string{"/", "/threads/" + thread, "/plugins", "/app.js"} {
		if status := tab.Go(d.page(path)); status != http.StatusUnauthorized {
			t.Errorf("%s without a session: %d; want 401", path, status)
		}
		if n, err := browsertest.Eval[int](tab, `document.querySelectorAll('[data-thread-id], [data-thread-page], [data-plugin]').length`); err != nil || n != 0 {
			t.Errorf("%s without a session shows %d threads or plugins (%v); want none", path, n, err)
		}
		if body, _ := browsertest.Eval[string](tab, `document.documentElement.outerHTML`); strings.Contains(body, thread) || !strings.Contains(body, "baton ui") {
			t.Errorf("%s without a session shows:\n%s\nwant only how to sign in (baton ui)", path, body)
		}
	}
}

// apiCall posts a Connect JSON call to url with cookie (none if empty),
// from no page (no Origin), and returns the status and the body.
func apiCall(t *testing.T, cookie, url, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// A page of another origin cannot act on the service with the user's
// cookie, though the browser sends it (127.0.0.1 on another port is the
// same site): a state-changing call from it is refused 403 by its Origin,
// and a call whose answer it would read is refused by the browser.
func TestBrowserCrossOrigin(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	b := browsertest.Start(t)
	user := b.NewTab("user")
	d.signIn(t, user)

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>another site</title><p>hello</p>`)
	}))
	defer evil.Close()
	attacker := b.NewTab("attacker") // the user's browser: the cookie goes along
	attacker.IgnoreConsole()         // the browser reports what it refused
	attacker.Go(evil.URL)

	responses := chromedp.Events(attacker.Ctx, network.ResponseReceived)
	create := d.page("/baton.v1.Baton/CreateThread")
	// A simple request (no preflight): the browser sends it, cookie and
	// Origin, and hides the answer from the page.
	if _, err := browsertest.Eval[string](attacker, fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", credentials: "include",
		headers: {"Content-Type": "text/plain"}, body: JSON.stringify({provider: "acp", cwd: "/tmp"})}).then(() => "sent")`, create)); err != nil {
		t.Fatal(err)
	}
	for ev, err := range responses {
		if err != nil {
			t.Fatalf("no answer to the cross-origin call: %v", err)
		}
		if ev.Response.URL == create {
			if ev.Response.Status != http.StatusForbidden {
				t.Errorf("a cross-origin POST answered %d; want 403", ev.Response.Status)
			}
			break
		}
	}
	// A call whose answer the page would read needs a grant the service
	// does not give.
	got, err := browsertest.Eval[string](attacker, fmt.Sprintf(`fetch(%q, {method: "POST", credentials: "include",
		headers: {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}, body: "{}"}).then(r => r.text(), e => "refused: " + e)`, d.page("/baton.v1.Baton/ListThreads")))
	if err != nil || !strings.HasPrefix(got, "refused: ") {
		t.Errorf("a cross-origin read of ListThreads gave %q, %v; want it refused", got, err)
	}
	l, err := c.ListThreads(t.Context(), &batonv1.ListThreadsRequest{All: true})
	if err != nil || len(l.GetThreads()) != 0 {
		t.Errorf("threads after the cross-origin calls: %v, %v; want none", l.GetThreads(), err)
	}
}

// Each view of the dashboard shows what it is for, and writes nothing to
// the console: the list of threads grouped by their directory, in the
// states a user acts on; a thread's page with its runs and answers; a
// pending approval; a checkpoint's diff and the rollback's confirmation;
// the installed plugins. With $BATON_DASHBOARD_SHOTS set (make
// screenshots), each view is saved there as dashboard-VIEW.png, the
// README's pictures.
func TestBrowserViews(t *testing.T) {
	d := startDashboard(t)
	c := d.client()
	shots := os.Getenv("BATON_DASHBOARD_SHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(tab *browsertest.Tab, view string) {
		if shots != "" {
			tab.Screenshot(filepath.Join(shots, "dashboard-"+view+".png"))
		}
	}
	dir := func(name string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// A thread done, one failed, one waiting for its user, and one of three
	// runs that changed files in a repository.
	site := dir("site")
	done := replayThread(t, c, site, "acp/simple.ndjson", "decline")
	failed := replayThread(t, c, site, "acp/exit_at_start.ndjson", "decline")
	ask := replayThread(t, c, dir("api"), "acp/approval_accept.ndjson", "ask")
	ev, _ := subscribe(t.Context(), t, c, "", 0)
	sendText(t, c, done, "Say hello.")
	sendText(t, c, failed, "Say hello.")
	sendText(t, c, ask, "Write allowed.txt")
	ws := gitRepo(t, "shop")
	files, cps := rollbackThread(t, c, ws)
	waiting := map[string]bool{done: true, failed: true, ask: true}
	until(t, ev, "the three threads settled", func(e event) bool {
		if e.Type == "run.ended" || e.Type == "request.opened" {
			delete(waiting, e.Thread)
		}
		return len(waiting) == 0
	})

	tab := browsertest.Start(t).NewTab("user")
	if shots != "" { // small pictures: a small window
		if err := chromedp.Do(tab.Ctx, chromedp.EmulateViewport(1024, 640)); err != nil {
			t.Fatal(err)
		}
	}
	d.signIn(t, tab)
	for id, state := range map[string]string{done: "done", failed: "failed", ask: "needs-you", files: "done"} {
		tab.Wait("thread "+id+" "+state, threadRow(id)+fmt.Sprintf(`[data-state=%q] a[href="/threads/%s"]`, state, id))
	}
	if n, err := browsertest.Eval[int](tab, `new Set([...document.querySelectorAll("[data-group]")].map(e => e.dataset.group)).size`); err != nil || n != 3 {
		t.Errorf("the list has %d groups (%v); want 3, one a directory", n, err)
	}
	shot(tab, "list")

	// The filters: by state, then by text (the directory's name).
	shown := func(what string, want ...string) {
		t.Helper()
		tab.WaitFor(what, fmt.Sprintf(`document.querySelectorAll("[data-thread-id]").length === %d`, len(want)))
		got, err := browsertest.Eval[[]string](tab, `[...document.querySelectorAll("[data-thread-id]")].map(e => e.dataset.threadId)`)
		slices.Sort(got)
		slices.Sort(want)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: rows %v (%v); want %v", what, got, err, want)
		}
	}
	stateFilter := func(v string) {
		t.Helper()
		if _, err := browsertest.Eval[bool](tab, fmt.Sprintf(`(() => { const s = document.querySelector("form.filters select");
			s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true })()`, v)); err != nil {
			t.Fatal(err)
		}
	}
	stateFilter("failed")
	shown("the failed threads", failed)
	stateFilter("done")
	shown("the threads done", done, files)
	stateFilter("")
	shown("every thread", done, failed, ask, files)
	tab.Type("the search", `form.filters input[type="search"]`, "api")
	shown("the threads whose directory is api", ask)

	tab.Go(d.page("/threads/" + ask))
	tab.Wait("the pending approval", `[data-request-id] button[data-decision="accept"]`)
	for _, decision := range []string{"accept_for_session", "decline", "cancel"} {
		tab.Wait("the choice "+decision, fmt.Sprintf(`[data-request-id] button[data-decision=%q]`, decision))
	}
	if _, err := browsertest.Eval[bool](tab, `(document.querySelector("[data-request-id]").scrollIntoView({block: "center"}), true)`); err != nil {
		t.Fatal(err)
	}
	shot(tab, "approval")

	tab.Go(d.page("/threads/" + files))
	tab.WaitFor("three runs completed", `document.querySelectorAll('[data-run-id][data-run-status="completed"]').length === 3`)
	tab.WaitFor("the last answer", assistantText+`.includes("Added c.txt.")`)
	shot(tab, "thread")

	row := fmt.Sprintf(`[data-checkpoint-id=%q]`, cps[2])
	tab.Click("run 2's diff", row+` button[data-action="diff"]`)
	tab.WaitFor("run 2's diff", fmt.Sprintf(`document.querySelector(%q).textContent.includes("+two")`, row+` [data-role="diff"]`))
	shot(tab, "diff")
	tab.Click("run 2's rollback", row+` button[data-action="rollback"]`)
	tab.Wait("the confirmation", `button[data-action="confirm-rollback"]`)
	shot(tab, "rollback")
	tab.Click("cancel", `button[data-action="cancel-rollback"]`)

	tab.Go(d.page("/plugins"))
	for _, p := range []string{"acp", "claude", "codex", "cursor", "opencode"} {
		tab.Wait("the plugin "+p, fmt.Sprintf(`[data-plugin=%q]`, p))
	}
	shot(tab, "plugins")

	// At a phone's width every view fits: nothing is wider than the
	// window, so nothing needs a sideways scroll.
	phone := browsertest.Start(t).NewTab("phone")
	if err := chromedp.Do(phone.Ctx, chromedp.EmulateViewport(375, 740)); err != nil {
		t.Fatal(err)
	}
	d.signIn(t, phone)
	for _, v := range []struct{ path, ready string }{
		{"/", threadRow(files)},
		{"/threads/" + files, `[data-run-id][data-run-status="completed"]`},
		{"/threads/" + ask, `[data-request-id] button[data-decision="accept"]`},
		{"/plugins", `[data-plugin="acp"]`},
	} {
		phone.Go(d.page(v.path))
		phone.Wait(v.path, v.ready)
		if w, err := browsertest.Eval[[]int](phone, `[document.documentElement.scrollWidth, window.innerWidth]`); err != nil || w[0] > w[1] {
			wide, _ := browsertest.Eval[[]string](phone, `[...document.querySelectorAll("body *")].filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0 && getComputedStyle(e).overflowX === "visible").slice(-6).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + e.scrollWidth + ">" + e.clientWidth)`)
			t.Errorf("%s at a phone's width: the page is %v px wide (%v), wider than its window; past its edge: %q", v.path, w, err, wide)
		}
	}
}
