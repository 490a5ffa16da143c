package browsertest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/baton-run/baton/host/internal/browsertest"
)

// A tab records what its page writes to the console; a second tab shares
// the first one's cookies, a private tab does not.
func TestBrowserTabs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "c", Value: "v", Path: "/", HttpOnly: true})
			io.WriteString(w, `<p>set</p>`)
		case "/loud":
			io.WriteString(w, `<p>loud</p><script>console.error("broken", 42); console.warn("careful")</script>`)
		default:
			c, err := r.Cookie("c")
			v := "none"
			if err == nil {
				v = c.Value
			}
			io.WriteString(w, `<p id="cookie">`+v+`</p>`)
		}
	}))
	defer srv.Close()
	b := browsertest.Start(t)

	loud := b.NewTab("loud")
	loud.IgnoreConsole()
	if err := chromedp.Do(loud.Ctx, chromedp.Navigate(srv.URL+"/loud")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(loud.Ctx, chromedp.Poll[bool](`true`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(loud.Console(), "\n"); !strings.Contains(got, "console.error: broken 42") || !strings.Contains(got, "console.warning: careful") {
		t.Errorf("console of the loud page:\n%s\nwant its error and its warning", got)
	}

	first, second, private := b.NewTab("first"), b.NewTab("second"), b.NewPrivateTab("private")
	if err := chromedp.Do(first.Ctx, chromedp.Navigate(srv.URL+"/set")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tab  *browsertest.Tab
		want string
	}{{second, "v"}, {private, "none"}} {
		if err := chromedp.Do(c.tab.Ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(c.tab.Ctx, chromedp.Text(chromedp.CSS("#cookie")))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("the cookie the server saw from a tab: %q, want %q", got, c.want)
		}
	}
}
