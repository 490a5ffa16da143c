package agents

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// t0 is the tests' clock's start.
var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// clock is a settable clock for Options.Now.
type clock struct{ now atomic.Pointer[time.Time] }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.set(t)
	return c
}

func (c *clock) set(t time.Time)     { c.now.Store(&t) }
func (c *clock) Now() time.Time      { return *c.now.Load() }
func (c *clock) add(d time.Duration) { c.set(c.Now().Add(d)) }

// registryServer serves a registry at /registry.json on 127.0.0.1: the
// body and status the test sets, counting requests.
type registryServer struct {
	*httptest.Server
	body     atomic.Value // []byte
	status   atomic.Int32
	requests atomic.Int32
}

func newRegistryServer(t *testing.T, body []byte) *registryServer {
	t.Helper()
	s := &registryServer{}
	s.body.Store(body)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.URL.Path != "/registry.json" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(s.status.Load()))
		w.Write(s.body.Load().([]byte))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *registryServer) url() string { return s.URL + "/registry.json" }

func readTestRegistry(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/registry.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A registry file is read and cached like a fetched one.
func TestLoadFromAFile(t *testing.T) {
	data := t.TempDir()
	cat, err := Load(t.Context(), Options{DataDir: data, Source: "testdata/registry.json", Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	if cat.FromCache || cat.FetchErr != nil || !cat.FetchedAt.Equal(t0) || cat.Age() != 0 {
		t.Errorf("fresh from a file: FromCache %v, FetchErr %v, FetchedAt %v, Age %v", cat.FromCache, cat.FetchErr, cat.FetchedAt, cat.Age())
	}
	if len(cat.Registry.Agents) != 3 || cat.Source != "testdata/registry.json" || cat.DataDir() != data {
		t.Errorf("catalog: %d agents, source %s, data dir %s", len(cat.Registry.Agents), cat.Source, cat.DataDir())
	}
	cached, err := os.ReadFile(filepath.Join(data, "agents", "registry.json"))
	if err != nil || string(cached) != string(readTestRegistry(t)) {
		t.Errorf("the cache is not the file as read: %v", err)
	}
}

// The registry is fetched over HTTP and cached with the time; when the
// server is gone, the cached copy serves, saying so and how old it is.
func TestLoadFetchesCachesAndFallsBackOffline(t *testing.T) {
	body := readTestRegistry(t)
	srv := newRegistryServer(t, body)
	data, clk := t.TempDir(), newClock(t0)
	opts := Options{DataDir: data, Source: srv.url(), Now: clk.Now}

	cat, err := Load(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cat.FromCache || cat.FetchErr != nil || !cat.FetchedAt.Equal(t0) || len(cat.Registry.Agents) != 3 {
		t.Fatalf("first load: FromCache %v, FetchErr %v, FetchedAt %v, %d agents", cat.FromCache, cat.FetchErr, cat.FetchedAt, len(cat.Registry.Agents))
	}
	dir := filepath.Join(data, "agents")
	cached, err := os.ReadFile(filepath.Join(dir, "registry.json"))
	if err != nil || string(cached) != string(body) {
		t.Fatalf("the cache is not the registry as served: %v", err)
	}
	var meta cacheMeta
	if b, err := os.ReadFile(filepath.Join(dir, "registry.meta.json")); err != nil || json.Unmarshal(b, &meta) != nil {
		t.Fatalf("no cache record: %v", err)
	}
	if meta.Source != srv.url() || !meta.FetchedAt.Equal(t0) {
		t.Errorf("cache record: %+v, want source %s fetched at %v", meta, srv.url(), t0)
	}
	for _, f := range []string{"registry.json", "registry.meta.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is not private: %v", f, err)
		}
	}

	srv.Close()
	clk.add(3 * time.Hour)
	offline, err := Load(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !offline.FromCache || !offline.FetchedAt.Equal(t0) || offline.Age() != 3*time.Hour {
		t.Errorf("offline: FromCache %v, FetchedAt %v, Age %v; want the cache of 3h ago", offline.FromCache, offline.FetchedAt, offline.Age())
	}
	if !errors.Is(offline.FetchErr, syscall.ECONNREFUSED) {
		t.Errorf("offline: FetchErr = %v, want the connection refused", offline.FetchErr)
	}
	if diff := cmp.Diff(cat.Registry, offline.Registry); diff != "" {
		t.Errorf("the cached registry differs (-fetched +cached):\n%s", diff)
	}
}

// A server that answers with an error status, or not in time, is as
// good as none: the cache serves, and FetchErr says what happened.
func TestLoadFallsBackOnAnErrorStatusAndATimeout(t *testing.T) {
	srv := newRegistryServer(t, readTestRegistry(t))
	data := t.TempDir()
	if _, err := Load(t.Context(), Options{DataDir: data, Source: srv.url()}); err != nil {
		t.Fatal(err)
	}

	srv.status.Store(http.StatusServiceUnavailable)
	cat, err := Load(t.Context(), Options{DataDir: data, Source: srv.url()})
	if err != nil {
		t.Fatal(err)
	}
	var status *StatusError
	if !cat.FromCache || !errors.As(cat.FetchErr, &status) || status.Code != http.StatusServiceUnavailable {
		t.Fatalf("on a 503: FromCache %v, FetchErr %v", cat.FromCache, cat.FetchErr)
	}
	if want := "GET " + srv.url() + ": 503 Service Unavailable"; cat.FetchErr.Error() != want {
		t.Errorf("FetchErr = %q, want %q", cat.FetchErr, want)
	}

	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers never; the client's giving up ends it
	}))
	defer hung.Close()
	// The cache is of the source, so the hung server's must be made first.
	hungData := t.TempDir()
	if err := writeCache(agentsDir(hungData), readTestRegistry(t), cacheMeta{Source: hung.URL + "/registry.json", FetchedAt: t0}); err != nil {
		t.Fatal(err)
	}
	cat, err = Load(t.Context(), Options{DataDir: hungData, Source: hung.URL + "/registry.json", FetchTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !cat.FromCache || !errors.Is(cat.FetchErr, context.DeadlineExceeded) {
		t.Errorf("on a timeout: FromCache %v, FetchErr %v", cat.FromCache, cat.FetchErr)
	}
}

// A malformed registry from the network is an error naming where it is
// wrong, and the cache keeps the good copy it had.
func TestLoadRefusesAMalformedRegistry(t *testing.T) {
	good := readTestRegistry(t)
	srv := newRegistryServer(t, good)
	data := t.TempDir()
	opts := Options{DataDir: data, Source: srv.url()}
	if _, err := Load(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	srv.body.Store([]byte("{\n  \"version\": \"1.0.0\",\n  \"agents\": [\n    {\"id\": \"x\", \"version\": \"1.0.0\", \"distribution\": {\"binary\": {\"linux-amd64\": {}}}}\n  ]\n}\n"))
	_, err := Load(t.Context(), opts)
	want := "load agent registry: parse " + srv.url() + `: line 4, column 65: agents[0].distribution.binary: unknown platform "linux-amd64" (known: darwin-aarch64, darwin-x86_64, linux-aarch64, linux-x86_64, windows-aarch64, windows-x86_64)`
	if err == nil || err.Error() != want {
		t.Fatalf("a malformed registry:\n%v\nwant\n%s", err, want)
	}
	var perr *ParseError
	if !errors.As(err, &perr) || perr.Line != 4 {
		t.Errorf("not a *ParseError of line 4: %#v", err)
	}
	if cached, _ := os.ReadFile(filepath.Join(data, "agents", "registry.json")); string(cached) != string(good) {
		t.Error("the malformed registry replaced the cache")
	}
	srv.Close()
	if cat, err := Load(t.Context(), opts); err != nil || !cat.FromCache || len(cat.Registry.Agents) != 3 {
		t.Errorf("offline after a malformed fetch: %v", err)
	}
}

// With nothing cached, an unreachable registry is an error that says
// both what failed and that no copy was there; a cache of another
// source, or one its record does not describe, is none.
func TestLoadWithoutAUsableCache(t *testing.T) {
	srv := newRegistryServer(t, readTestRegistry(t))
	url := srv.url()
	srv.Close()

	_, err := Load(t.Context(), Options{DataDir: t.TempDir(), Source: url})
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, os.ErrNotExist) ||
		!strings.Contains(err.Error(), "; no cached copy to use instead: read cached registry: ") {
		t.Errorf("nothing cached: %v", err)
	}

	data := t.TempDir()
	if _, err := Load(t.Context(), Options{DataDir: data, Source: "testdata/registry.json"}); err != nil {
		t.Fatal(err)
	}
	_, err = Load(t.Context(), Options{DataDir: data, Source: url})
	if want := "the cached registry is of testdata/registry.json, not " + url; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("the cache of another source: %v\nwant it to end %q", err, want)
	}

	if err := writeCache(agentsDir(data), readTestRegistry(t), cacheMeta{Source: url, FetchedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "agents", "registry.json"), []byte(`{"version": "1.0.0", "agents": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(t.Context(), Options{DataDir: data, Source: url})
	if err == nil || !strings.Contains(err.Error(), "registry.json is not the file registry.meta.json describes") {
		t.Errorf("a cache its record does not describe: %v", err)
	}
}

// What Load refuses before any network: no data dir, a source that is
// neither a URL nor a file, a missing file; and a caller's ctx that has
// ended is not a reason to use the cache.
func TestLoadRefuses(t *testing.T) {
	data := t.TempDir()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Source: "testdata/registry.json"}, "load agent registry: no data directory"},
		{Options{DataDir: data, Source: "ftp://example.com/registry.json"},
			"load agent registry: registry source ftp://example.com/registry.json: only http, https and file paths are read"},
		{Options{DataDir: data, Source: "https://"}, `load agent registry: "https://" is not a URL`},
		{Options{DataDir: data, Source: "testdata/missing.json"},
			"load agent registry: read registry: open testdata/missing.json: no such file or directory"},
	} {
		if _, err := Load(t.Context(), tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("Load(%+v):\n%v\nwant\n%s", tc.opts, err, tc.want)
		}
	}

	srv := newRegistryServer(t, readTestRegistry(t))
	if _, err := Load(t.Context(), Options{DataDir: data, Source: srv.url()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("the user pressed ^C")
	cancel(stop)
	if _, err := Load(ctx, Options{DataDir: data, Source: srv.url()}); !errors.Is(err, stop) {
		t.Errorf("an ended ctx: %v, want the cause %v", err, stop)
	}
}
