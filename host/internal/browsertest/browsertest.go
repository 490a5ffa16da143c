// Package browsertest runs headless Chromium for the dashboard's tests and
// benchmarks.
//
// Start finds the browser (Debian's chromium package) and starts it with the
// flags a machine without a network beyond its package registries needs;
// without them Chromium keeps trying to reach Google's hosts. A Browser opens
// tabs: NewTab shares the browser's cookies (a second tab of a signed-in
// user), NewPrivateTab has none (a stranger). Each tab records what its pages
// write to the console and fails the test on an error or a warning; when the
// test has failed, each tab's page is saved as a PNG (in $BATON_SCREENSHOTS,
// or a folder of the system's temp dir) and its text is logged, so a CI log
// shows what the page showed.
//
// When no Chromium is found the test is skipped, or fails when
// BATON_BROWSER=required (as make test sets it), naming how to install it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Environment variables the package reads.
const (
	// RequireEnv set to "required" turns a missing browser from a skip into
	// a failure: make test and make browser-test set it, so CI cannot pass
	// without having run the browser tests.
	RequireEnv = "BATON_BROWSER"
	// ExecEnv names the browser's binary, when it is not on PATH.
	ExecEnv = "BATON_CHROMIUM"
	// ScreenshotsEnv names the folder a failed test's screenshots go to.
	ScreenshotsEnv = "BATON_SCREENSHOTS"
)

// installHint is what a test without a browser says to do.
const installHint = "install Debian's chromium package (apt-get install chromium; make browser-test does it), or set " +
	ExecEnv + " to a Chromium or Chrome binary"

// WaitTimeout bounds every wait of Tab.Wait and Tab.Poll: a page that never
// shows what the test waits for fails the test instead of hanging it. It
// is far above what a loaded machine needs; the waits end on the DOM
// condition, not on the clock.
const WaitTimeout = 90 * time.Second

// Names the binary goes by, in the order they are looked for on PATH.
var execNames = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// Find returns the path of the browser: $BATON_CHROMIUM, else the first of
// execNames on PATH.
func Find() (string, error) {
	if p := os.Getenv(ExecEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", ExecEnv, p, err)
		}
		return p, nil
	}
	for _, name := range execNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no browser on PATH (looked for %s)", strings.Join(execNames, ", "))
}

// Browser is one headless Chromium process, ended when its test ends.
type Browser struct {
	tb  testing.TB
	ctx context.Context // the browser's first tab; its children are the tabs
}

// Start starts the browser for tb. Without one, tb is skipped, or fails
// when $BATON_BROWSER is "required".
func Start(tb testing.TB) *Browser {
	tb.Helper()
	path, err := Find()
	if err != nil {
		if os.Getenv(RequireEnv) == "required" {
			tb.Fatalf("the browser tests need Chromium: %v; %s", err, installHint)
		}
		tb.Skipf("no Chromium (%v); %s, or set %s=required to fail instead of skipping", err, installHint, RequireEnv)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Nothing but the pages under test: no background requests, updates
		// or sync, which a closed network refuses many at a time.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		// A tab in the background runs its timers and frames as one in
		// front does: several tabs of one test all stay live.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(1280, 900),
	}
	// The browser lives until the test's cleanups have run (they take the
	// screenshots), so its context is not the test's: that one ends first.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Do starts the browser and binds it to ctx, so it is given
	// ctx itself: a context with a deadline would end the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start %s: %v", path, err)
	}
	return &Browser{tb: tb, ctx: ctx}
}

// NewTab opens a tab that shares the browser's cookies with its other tabs.
func (b *Browser) NewTab(name string) *Tab {
	b.tb.Helper()
	return b.open(name)
}

// NewPrivateTab opens a tab in a browser context of its own: no cookie of
// the other tabs reaches it, none of its reaches them.
func (b *Browser) NewPrivateTab(name string) *Tab {
	b.tb.Helper()
	return b.open(name, chromedp.WithNewBrowserContext())
}

func (b *Browser) open(name string, opts ...chromedp.ContextOption) *Tab {
	b.tb.Helper()
	t := &Tab{tb: b.tb, name: name}
	ctx, cancel := chromedp.NewContext(b.ctx, append(opts, chromedp.WithListener(t.listen))...)
	t.Ctx = ctx
	// Cleanups run last first: the tab closes after its checks.
	b.tb.Cleanup(cancel)
	b.tb.Cleanup(t.afterTest)
	if err := chromedp.Do(ctx); err != nil {
		b.tb.Fatalf("open tab %s: %v", name, err)
	}
	return t
}

// Tab is one browser tab and what its pages wrote to the console.
type Tab struct {
	// Ctx runs chromedp actions in the tab.
	Ctx context.Context

	tb   testing.TB
	name string

	mu       sync.Mutex
	console  []string // errors and warnings, in order
	unwatch  bool     // the console is not checked at the end
	shotPath string   // where the failure screenshot went
}

// IgnoreConsole stops the tab's console from being checked at the end of the
// test: for a page that is meant to fail (an attacker's, one without a
// session), whose errors are the browser's own report of the refusal.
func (t *Tab) IgnoreConsole() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unwatch = true
}

// Console returns the errors and warnings the tab's pages wrote so far.
func (t *Tab) Console() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.console...)
}

// listen records console errors and warnings, uncaught exceptions and the
// browser's own log entries of those levels (a failed request, a refused
// script). It runs in the tab's event loop, so it only appends.
func (t *Tab) listen(ev any) {
	var line string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, remoteText(a))
		}
		line = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + remoteText(d.Exception)
		}
		line = fmt.Sprintf("exception: %s (%s:%d)", text, d.URL, d.LineNumber+1)
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError && e.Level != log.EntryLevelWarning {
			return
		}
		line = fmt.Sprintf("%s %s: %s (%s)", e.Source, e.Level, e.Text, e.URL)
	default:
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.console = append(t.console, line)
}

// remoteText is a console argument as the DevTools console shows it.
func remoteText(o *runtime.RemoteObject) string {
	switch {
	case o == nil:
		return "null"
	case o.Type == runtime.RemoteObjectTypeString:
		return strings.Trim(string(o.Value), `"`)
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return string(o.Type)
}

// afterTest fails the test on a console error or warning, then, if the test
// failed, saves the page.
func (t *Tab) afterTest() {
	t.mu.Lock()
	console, unwatch := t.console, t.unwatch
	t.mu.Unlock()
	if !unwatch && len(console) > 0 {
		t.tb.Errorf("tab %s: the pages wrote %d errors or warnings to the console:\n  %s", t.name, len(console), strings.Join(console, "\n  "))
	}
	if t.tb.Failed() {
		t.saveFailure()
	}
}

// saveFailure writes the page's screenshot to the screenshots folder and
// logs its address and its text.
func (t *Tab) saveFailure() {
	ctx, cancel := context.WithTimeout(t.Ctx, 20*time.Second)
	defer cancel()
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "baton-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.tb.Logf("tab %s: no screenshot: %v", t.name, err)
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		path := filepath.Join(dir, fileName(t.tb.Name()+"-"+t.name)+".png")
		if err = os.WriteFile(path, png, 0o644); err == nil {
			t.shotPath = path
			t.tb.Logf("tab %s: screenshot of the failed test: %s", t.name, path)
		}
	}
	if err != nil {
		t.tb.Logf("tab %s: no screenshot: %v", t.name, err)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "(no body)")`))
	if err != nil {
		t.tb.Logf("tab %s: cannot read the page: %v", t.name, err)
		return
	}
	const most = 4000
	if len(page) > most {
		page = page[:most] + "…"
	}
	t.tb.Logf("tab %s showed %s", t.name, page)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName is s with what a file name cannot hold replaced.
func fileName(s string) string { return unsafeName.ReplaceAllString(s, "_") }
