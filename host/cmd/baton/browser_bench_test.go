//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/browsertest"
)

// The dashboard's first render, measured in the browser: from the start of
// a page's navigation (performance.now()'s origin) to the first frame after
// the last element is in the DOM, beside the API call the page makes for
// it alone (fetch in the same page, its JSON read). Each op is one load of
// the page; render-ms and api-ms are the medians over the ops.

// renderProbe is JavaScript run in every new document before the page's
// own: it records in window.batonRendered the time of the first animation
// frame after cond (a JavaScript expression) holds, watching every DOM
// change, so the time does not depend on when the test asks.
func renderProbe(cond string) string {
	return fmt.Sprintf(`(() => {
		const met = () => { try { return !!(%s); } catch (e) { return false; } };
		const observer = new MutationObserver(() => {
			if (!met()) return;
			observer.disconnect();
			requestAnimationFrame(() => { window.batonRendered = performance.now(); });
		});
		observer.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
	})()`, cond)
}

// apiProbe is JavaScript that times one call of method with body from the
// page, its JSON read, in milliseconds.
func apiProbe(method, body string) string {
	return fmt.Sprintf(`(async () => {
		const t0 = performance.now();
		const r = await fetch("/baton.v1.Baton/%s", {method: "POST", headers: {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}, body: %q});
		if (!r.ok) throw new Error("%s: " + r.status + " " + await r.text());
		await r.json();
		return performance.now() - t0;
	})()`, method, body, method)
}

// benchRender loads url b.N times in a signed-in tab; cond says the page is
// whole. It reports the medians of the render and of the API call.
func benchRender(b *testing.B, tab *browsertest.Tab, url, cond, method, body string) {
	if _, err := chromedp.Call(tab.Ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: renderProbe(cond)}); err != nil {
		b.Fatal(err)
	}
	var render, api []float64
	for b.Loop() {
		tab.Go(url)
		tab.WaitFor("the whole page", "window.batonRendered !== undefined")
		ms, err := browsertest.Eval[float64](tab, "window.batonRendered")
		if err != nil {
			b.Fatal(err)
		}
		render = append(render, ms)
		b.StopTimer()
		if ms, err = browsertest.Eval[float64](tab, apiProbe(method, body)); err != nil {
			b.Fatal(err)
		}
		api = append(api, ms)
		b.StartTimer()
	}
	b.ReportMetric(median(render), "render-ms")
	b.ReportMetric(median(api), "api-ms")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkDashboardList: the list of 1,000 threads, beside ListThreads of
// the same 1,000, and beside the list of one thread (the page's own cost:
// its script, its first calls, its subscription).
func BenchmarkDashboardList(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			d := startDashboard(b)
			start := time.Now()
			createThreads(b, d.client(), n)
			b.Logf("%d threads created in %v", n, time.Since(start).Round(time.Millisecond))
			tab := browsertest.Start(b).NewTab("list")
			d.signIn(b, tab)
			all := fmt.Sprintf(`document.querySelectorAll("[data-thread-id]").length === %d`, n)
			tab.WaitFor("every thread", all)
			benchRender(b, tab, d.page("/"), all, "ListThreads", fmt.Sprintf(`{"pageSize": %d}`, n))
		})
	}
}

// createThreads creates n threads (each a replay of the simple transcript,
// never started), 8 at a time.
func createThreads(b *testing.B, c batonv1.BatonClient, n int) {
	b.Helper()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath("acp/simple.ndjson"), "--speed", "0"}
	cwd := b.TempDir()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.CreateThread(context.Background(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: cwd,
					ProviderCommand: &batonv1.ProviderCommand{Argv: argv}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create threads: %v", err)
	}
}

// BenchmarkDashboardThread: the page of a thread whose one run streamed
// 10,000 and 100,000 deltas, beside GetThread of it.
func BenchmarkDashboardThread(b *testing.B) {
	for _, deltas := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("deltas=%d", deltas), func(b *testing.B) { benchThreadPage(b, deltas) })
	}
}

// benchThreadPage times the first render of a thread whose one run
// streamed n deltas.
func benchThreadPage(b *testing.B, deltas int) {
	d := startDashboard(b)
	c := d.client()
	transcript := deltaTranscript(b, deltas)
	r, err := c.CreateThread(b.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: b.TempDir(),
		ProviderCommand: &batonv1.ProviderCommand{Argv: []string{filepath.Join(binDir, "replaypeer"), "--transcript", transcript, "--speed", "0"}}})
	if err != nil {
		b.Fatal(err)
	}
	id := r.GetThreadId()
	ev, _ := subscribe(b.Context(), b, c, id, 0)
	if _, err := c.SendMessage(b.Context(), &batonv1.SendMessageRequest{ThreadId: id, Text: "Say hello."}); err != nil {
		b.Fatal(err)
	}
	until(b, ev, "the run's end", ofType("run.ended"))
	tab := browsertest.Start(b).NewTab("thread")
	d.signIn(b, tab, id)
	last := fmt.Sprintf("word%d.", deltas-1)
	whole := `document.querySelector('[data-run-status="completed"]') !== null && ` + assistantText + fmt.Sprintf(`.endsWith(%q)`, last)
	benchRender(b, tab, d.page("/threads/"+id), whole, "GetThread", fmt.Sprintf(`{"threadId": %q}`, id))
}

// deltaTranscript writes the simple transcript with its answer sent as n
// deltas ("word0 word1 … wordN-1."), and returns its path.
func deltaTranscript(b *testing.B, n int) string {
	b.Helper()
	in, err := os.Open(testdataPath("acp/simple.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(b.TempDir(), "deltas.ndjson")
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	replaced := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "Hello from the replay agent.") {
			fmt.Fprintln(w, line)
			continue
		}
		for i := range n {
			text := fmt.Sprintf("word%d ", i)
			if i == n-1 {
				text = fmt.Sprintf("word%d.", i)
			}
			t, _ := json.Marshal(text)
			fmt.Fprintln(w, strings.Replace(line, `"Hello from the replay agent."`, string(t), 1))
		}
		replaced = true
	}
	if err := sc.Err(); err != nil || !replaced {
		b.Fatalf("read the simple transcript: %v (its answer found: %v)", err, replaced)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return path
}
