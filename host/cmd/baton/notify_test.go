//go:build linux

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// A webhook receiver on 127.0.0.1, as a user's would be: it checks each
// delivery's signature, keeps what it got, and answers 503 while it is
// told to refuse.
type hookReceiver struct {
	*httptest.Server
	t      *testing.T
	secret []byte
	got    chan hookDelivery
	mu     sync.Mutex
	refuse bool
	taken  map[string]int // deliveries answered 2xx, by id
}

// hookDelivery is one POST a receiver got.
type hookDelivery struct {
	ID       string
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	RunID    string `json:"run_id"`
	Sequence uint64 `json:"sequence"`
	Title    string `json:"title"`
	Detail   map[string]any
	Body     string
	Answered int
}

func newHookReceiver(t *testing.T, secret []byte) *hookReceiver {
	r := &hookReceiver{t: t, secret: secret, got: make(chan hookDelivery, 64), taken: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	m := hmac.New(sha256.New, r.secret)
	m.Write(body)
	if sig := req.Header.Get("X-Baton-Signature"); sig != "sha256="+hex.EncodeToString(m.Sum(nil)) {
		r.t.Errorf("delivery %s: signature %q does not match its body", req.Header.Get("X-Baton-Delivery"), sig)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		r.t.Errorf("content type %q", ct)
	}
	var d hookDelivery
	if err := json.Unmarshal(body, &d); err != nil {
		r.t.Errorf("delivery body %s: %v", body, err)
	}
	var doc struct {
		ID     string         `json:"id"`
		Detail map[string]any `json:"detail"`
	}
	json.Unmarshal(body, &doc)
	if h := req.Header.Get("X-Baton-Delivery"); h != doc.ID {
		r.t.Errorf("X-Baton-Delivery %q, body's id %q", h, doc.ID)
	}
	d.ID, d.Detail, d.Body = doc.ID, doc.Detail, string(body)
	r.mu.Lock()
	d.Answered = http.StatusOK
	if r.refuse {
		d.Answered = http.StatusServiceUnavailable
	} else {
		r.taken[d.ID]++
	}
	r.mu.Unlock()
	w.WriteHeader(d.Answered)
	r.got <- d
}

func (r *hookReceiver) setRefuse(on bool) {
	r.mu.Lock()
	r.refuse = on
	r.mu.Unlock()
}

// next is the next delivery the receiver gets.
func (r *hookReceiver) next(t *testing.T, what string) hookDelivery {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(90 * time.Second):
		t.Fatalf("no webhook delivery of %s in 90s", what)
		return hookDelivery{}
	}
}

// writeSecret writes a webhook secret file of mode perm.
func writeSecret(t *testing.T, secret string, perm os.FileMode) string {
	path := filepath.Join(t.TempDir(), "hook-secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// A service with --notify posts, signed, a request that waits for a
// person and the run's end, each with the thread's title and the event's
// sequence; the request's answer and the run's other events post nothing.
func TestServiceWebhooks(t *testing.T) {
	secret := "hook s3cret"
	r := newHookReceiver(t, []byte(secret))
	s := startService(t, t.TempDir(), "--notify", r.URL+"/baton", "--notify-secret-file", writeSecret(t, secret, 0o600))
	c := s.client()
	id := createThread(t, c, "acp/approval_accept.ndjson", "ask")
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	opened, reqID := askApproval(t, c, id, ev, "a request")
	pending := r.next(t, "the pending request")
	if _, err := c.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: reqID, Decision: "accept"}); err != nil {
		t.Fatal(err)
	}
	evs := until(t, ev, "the run's end", ofType("run.ended"))
	ended := r.next(t, "the run's end")
	runID := thread(t, c, id)["runs"].([]any)[0].(map[string]any)["id"].(string)
	seqOpened, seqEnded := opened[len(opened)-1].Seq, evs[len(evs)-1].Seq
	type seen struct {
		ID, Type, ThreadID, RunID, Title string
		Sequence                         uint64
		Detail                           map[string]any
	}
	got := []seen{
		{pending.ID, pending.Type, pending.ThreadID, pending.RunID, pending.Title, pending.Sequence, pending.Detail},
		{ended.ID, ended.Type, ended.ThreadID, ended.RunID, ended.Title, ended.Sequence, ended.Detail},
	}
	want := []seen{
		{id + "-" + strconv.FormatUint(seqOpened, 10), "request.pending", id, runID, "Write allowed.txt", seqOpened,
			map[string]any{"request_id": reqID, "kind": pending.Detail["kind"], "summary": pending.Detail["summary"]}},
		{id + "-" + strconv.FormatUint(seqEnded, 10), "run.ended", id, runID, "Write allowed.txt", seqEnded, map[string]any{"status": "completed", "stop_reason": "end_turn"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if pending.Detail["kind"] == nil || pending.Detail["summary"] == nil {
		t.Errorf("the pending request's detail lacks its kind or summary: %v", pending.Detail)
	}
	select {
	case d := <-r.got:
		t.Errorf("a delivery more: %s", d.Body)
	default:
	}
}

// Targets saved with `notify add` are the service's too, each taking only
// the events it names: one saved for run.ended gets the run's end and not
// the pending request; one saved for every event gets both, in order.
func TestSavedWebhookTargetsTakeTheirEvents(t *testing.T) {
	data := t.TempDir()
	ends, all := newHookReceiver(t, []byte("k")), newHookReceiver(t, []byte("k"))
	for _, args := range [][]string{{ends.URL + "/ends", "--events", "run.ended"}, {all.URL + "/all"}} {
		if out, errOut, code := baton(t, append([]string{"notify", "add", "--data", data}, args...)...); code != exitOK {
			t.Fatalf("notify add %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	s := startService(t, data, "--notify-secret-file", writeSecret(t, "k", 0o600))
	c := s.client()
	id := createThread(t, c, "acp/approval_accept.ndjson", "ask")
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	_, reqID := askApproval(t, c, id, ev, "a request")
	if _, err := c.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: reqID, Decision: "accept"}); err != nil {
		t.Fatal(err)
	}
	until(t, ev, "the run's end", ofType("run.ended"))
	got := map[string][]string{}
	for _, r := range []struct {
		name string
		r    *hookReceiver
		n    int
	}{{"ends", ends, 1}, {"all", all, 2}} {
		for range r.n {
			d := r.r.next(t, "a delivery to "+r.name)
			got[r.name] = append(got[r.name], d.Type)
		}
	}
	want := map[string][]string{"ends": {"run.ended"}, "all": {"request.pending", "run.ended"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("deliveries to the saved targets (-want +got):\n%s", d)
	}
	s.signal(syscall.SIGTERM) // all sent: nothing more is delivered as it stops
	for name, r := range map[string]*hookReceiver{"ends": ends, "all": all} {
		select {
		case d := <-r.got:
			t.Errorf("a delivery more to %s: %s", name, d.Body)
		default:
		}
	}
}

// A service SIGKILLed while its receiver refuses a delivery it committed
// loses none: notify list shows it failing; started again, the service
// sends it with the same id and body, it is delivered once, and nothing is
// left to send.
func TestServiceWebhookSurvivesSIGKILL(t *testing.T) {
	data := t.TempDir()
	secret := writeSecret(t, "k", 0o600)
	r := newHookReceiver(t, []byte("k"))
	r.setRefuse(true)
	url := r.URL + "/hook"
	s := startService(t, data, "--notify", url, "--notify-secret-file", secret)
	_, id, ev, _ := s.startTurn(t, "acp/simple.ndjson", "Say hello")
	until(t, ev, "the run's end", ofType("run.ended"))
	first := r.next(t, "the run's end, refused")
	if first.Type != "run.ended" || first.Answered != http.StatusServiceUnavailable {
		t.Fatalf("first delivery %+v", first)
	}
	// A second try comes once the first is recorded as failed.
	if again := r.next(t, "the run's end, tried again"); again.ID != first.ID || again.Body != first.Body {
		t.Fatalf("the second try:\n%s\nthe first:\n%s", again.Body, first.Body)
	}
	s.signal(syscall.SIGKILL)

	// The log has it, failing, as the killed service left it.
	out, errOut, code := baton(t, "notify", "list", "--data", data)
	if code != exitOK {
		t.Fatalf("notify list: exit %d: %s", code, errOut)
	}
	norm := regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(out, "127.0.0.1:PORT")
	norm = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(norm, "TIME")
	norm = strings.ReplaceAll(norm, first.ID, "ID")
	norm = regexp.MustCompile(`failing +\d+ `).ReplaceAllString(norm, "failing N ")
	norm = regexp.MustCompile(` {2,}`).ReplaceAllString(norm, " ") // the table's columns
	want := `http://127.0.0.1:PORT/hook (all events; given to baton serve --notify)
 ID TYPE STATE TRIES NEXT TRY LAST ERROR
 ID run.ended failing N TIME the receiver answered 503 Service Unavailable
`
	if norm != want {
		t.Errorf("notify list after the kill:\n%s\nwant (ports, times, ids and tries replaced, spaces squeezed):\n%s", out, want)
	}
	for len(r.got) > 0 { // tries between the second and the kill
		if d := <-r.got; d.ID != first.ID {
			t.Fatalf("a delivery of another event: %s", d.Body)
		}
	}

	r.setRefuse(false)
	delivered := &lineWatch{word: "webhook delivered", seen: make(chan struct{})}
	s = startServiceLogging(t, data, delivered, "--notify", url, "--notify-secret-file", secret, "--log-level", "debug")
	var after hookDelivery
	for after = r.next(t, "the run's end, after the restart"); after.Answered != http.StatusOK; after = r.next(t, "the run's end, taken") {
	}
	if after.ID != first.ID || after.Body != first.Body || after.ThreadID != id {
		t.Errorf("after the restart:\n%s\nbefore:\n%s", after.Body, first.Body)
	}
	select {
	case <-delivered.seen: // logged once its removal is recorded
	case <-time.After(90 * time.Second):
		t.Fatalf("the service did not record the delivery\n%s", s.stderr)
	}
	s.signal(syscall.SIGTERM)
	r.mu.Lock()
	taken := r.taken[first.ID]
	r.mu.Unlock()
	if taken != 1 {
		t.Errorf("delivery %s was taken %d times, want 1", first.ID, taken)
	}
	// Nothing is left to send: no later start sends it again.
	out, _, _ = baton(t, "notify", "list", "--data", data)
	norm = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(out, "127.0.0.1:PORT")
	norm = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(norm, "TIME")
	if want := "http://127.0.0.1:PORT/hook (all events; given to baton serve --notify): 1 delivered, the last at TIME\n  no deliveries waiting\n"; norm != want {
		t.Errorf("notify list after the delivery:\n%s\nwant (port and time replaced):\n%s", out, want)
	}
}

// lineWatch is a log writer that closes seen once a write holds word.
type lineWatch struct {
	word string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.word) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(b), nil
}

// notify add, list and remove keep the data dir's targets; list's output
// is pinned, for people and as JSON.
func TestNotifyVerbs(t *testing.T) {
	data := t.TempDir()
	env := append(os.Environ(), "BATON_DATA="+data)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return execBaton(t, env, "", args...)
	}
	for _, c := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"notify", "list"}, exitOK, "no saved webhook targets and no deliveries waiting (baton notify add URL, or baton serve --notify URL)\n", ""},
		{[]string{"notify", "add", "http://127.0.0.1:9000/baton"}, exitOK, "saved http://127.0.0.1:9000/baton (all events); a running baton serve takes it when it next starts\n", ""},
		{[]string{"notify", "add", "https://hooks.example/b", "--events", "run.ended,request.pending"}, exitOK,
			"saved https://hooks.example/b (run.ended, request.pending); a running baton serve takes it when it next starts\n", ""},
		{[]string{"notify", "list"}, exitOK, `http://127.0.0.1:9000/baton (all events; saved)
  no deliveries waiting
https://hooks.example/b (run.ended, request.pending; saved)
  no deliveries waiting
`, ""},
		{[]string{"notify", "list", "--json"}, exitOK, `{"url":"http://127.0.0.1:9000/baton","saved":true,"delivered":0,"deliveries":[]}
{"url":"https://hooks.example/b","events":["run.ended","request.pending"],"saved":true,"delivered":0,"deliveries":[]}
`, ""},
		{[]string{"notify", "add", "ftp://x/y"}, exitUsage, "", "baton: notify add: webhook URL \"ftp://x/y\" is not http:// or https://\n"},
		{[]string{"notify", "add", "http://x/y", "--events", "run.done"}, exitUsage, "",
			"baton: notify add: --events: unknown event \"run.done\": the events are request.pending, run.ended, wait.started, wait.ended\n"},
		{[]string{"notify", "remove", "http://127.0.0.1:9000/baton"}, exitOK, "removed http://127.0.0.1:9000/baton; a running baton serve drops its deliveries when it next starts\n", ""},
		{[]string{"notify", "remove", "http://127.0.0.1:9000/baton"}, exitUsage, "",
			"baton: notify remove: http://127.0.0.1:9000/baton is not a saved target (baton notify list shows them; one given to baton serve --notify goes when serve starts without it)\n"},
		{[]string{"notify", "list"}, exitOK, "https://hooks.example/b (run.ended, request.pending; saved)\n  no deliveries waiting\n", ""},
		{[]string{"notify"}, exitUsage, "", "baton: notify: give a subcommand: add, list or remove (baton notify --help)\n"},
	} {
		out, errOut, code := run(c.args...)
		if code != c.code || out != c.out || errOut != c.errOut {
			t.Errorf("baton %s: exit %d\n%s%s\nwant exit %d\n%s%s", strings.Join(c.args, " "), code, out, errOut, c.code, c.out, c.errOut)
		}
	}
	info, err := os.Stat(filepath.Join(data, "notify.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the targets file: %v, %v", info, err)
	}
}

// serve refuses a webhook it cannot use before it starts: a URL that is
// not http or https (exit 2), a secret file others may read (exit 1,
// naming the fix).
func TestServeRefusesBadWebhooks(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	loose := writeSecret(t, "k", 0o644)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--notify", "mailto:me@example"}, exitUsage, `baton: serve: --notify: webhook URL "mailto:me@example" is not http:// or https://`},
		{[]string{"--notify", "http://127.0.0.1:1/h", "--notify-secret-file", loose}, exitFailed,
			"baton: serve: webhook secret file " + loose + " is mode 0644: others than its owner may read or change it; chmod 600 " + loose},
	} {
		_, errOut, code := baton(t, append([]string{"serve", "--data", data}, c.args...)...)
		if code != c.code || !strings.HasPrefix(errOut, c.says+"\n") {
			t.Errorf("serve %v: exit %d, %s; want exit %d, %s", c.args, code, errOut, c.code, c.says)
		}
	}
}
