package browsertest

import (
	"context"
	"fmt"
	"os"

	"github.com/chromedp/chromedp"
)

// The actions a test takes in a tab. Each fails the test with what it was
// doing; each wait ends when the page shows what it waits for, or fails
// after WaitTimeout.

// Go loads url in the tab, waits for its document and returns its HTTP
// status.
func (t *Tab) Go(url string) int64 {
	t.tb.Helper()
	ctx, cancel := context.WithTimeout(t.Ctx, WaitTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		t.tb.Fatalf("tab %s: load %s: %v", t.name, url, err)
	}
	return resp.Status
}

// WaitFor waits until the JavaScript expression cond is true in the page;
// what names it in the failure.
func (t *Tab) WaitFor(what, cond string) {
	t.tb.Helper()
	if _, err := Eval[bool](t, fmt.Sprintf(`new Promise((resolve, reject) => {
		const met = () => { try { return !!(%s); } catch (e) { return false; } };
		if (met()) { resolve(true); return; }
		const done = () => { observer.disconnect(); clearInterval(timer); resolve(true); };
		const observer = new MutationObserver(() => { if (met()) done(); });
		observer.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
		const timer = setInterval(() => { if (met()) done(); }, 100);
	})`, cond)); err != nil {
		t.tb.Fatalf("tab %s: the page showed no %s in %v (%s): %v", t.name, what, WaitTimeout, cond, err)
	}
}

// Wait waits until an element matching the CSS selector css is in the page.
func (t *Tab) Wait(what, css string) {
	t.tb.Helper()
	t.WaitFor(what, fmt.Sprintf("document.querySelector(%q) !== null", css))
}

// Click clicks the element matching css, once one is in the page, with the
// mouse at its middle, as a user would once it is scrolled to the middle
// of the window (at an edge, a sticky header or footer can cover it).
func (t *Tab) Click(what, css string) {
	t.tb.Helper()
	t.Wait(what, css)
	if _, err := Eval[bool](t, fmt.Sprintf(`(document.querySelector(%q).scrollIntoView({block: "center"}), true)`, css)); err != nil {
		t.tb.Fatalf("tab %s: scroll to %s (%s): %v", t.name, what, css, err)
	}
	if err := t.do(chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible)); err != nil {
		t.tb.Fatalf("tab %s: click %s (%s): %v", t.name, what, css, err)
	}
}

// Type types text into the field matching css, once one is in the page.
func (t *Tab) Type(what, css, text string) {
	t.tb.Helper()
	t.Wait(what, css)
	if err := t.do(chromedp.SendKeys(chromedp.CSS(css), text, chromedp.NodeVisible)); err != nil {
		t.tb.Fatalf("tab %s: type into %s (%s): %v", t.name, what, css, err)
	}
}

// Eval evaluates the JavaScript expression js in tab's page, awaiting it if
// it is a promise, and decodes its value into a T.
func Eval[T any](tab *Tab, js string) (T, error) {
	ctx, cancel := context.WithTimeout(tab.Ctx, WaitTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// do runs actions in the tab, bounded by WaitTimeout.
func (t *Tab) do(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(t.Ctx, WaitTimeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Screenshot saves what the tab's window shows as a PNG at path.
func (t *Tab) Screenshot(path string) {
	t.tb.Helper()
	ctx, cancel := context.WithTimeout(t.Ctx, WaitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.tb.Fatalf("tab %s: screenshot to %s: %v", t.name, path, err)
	}
}
