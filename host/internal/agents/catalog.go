package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-run/baton/host/internal/atomicfile"
)

// DefaultRegistryURL is where the ACP Registry publishes its index.
const DefaultRegistryURL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"

// DefaultFetchTimeout bounds a fetch of the registry when Options says
// nothing: the index is tens of kilobytes, so a fetch that takes longer
// is a network that is not there, and the cached copy serves better than
// a wait.
const DefaultFetchTimeout = 20 * time.Second

// maxRegistrySize is the most of a registry read: a thousand times
// today's index, and a bound on what a broken server can make us hold.
const maxRegistrySize = 32 << 20

// Files of the registry's cache, in the agents directory.
const (
	cacheFile = "registry.json"      // the registry exactly as fetched
	metaFile  = "registry.meta.json" // where and when it was fetched
)

// Options says where the registry comes from and where Baton keeps its
// agents. The zero value reads the default registry with no data dir to
// cache it in, which Load refuses: DataDir is required.
type Options struct {
	// DataDir is Baton's data directory; the catalog's cache and the
	// installs live in DataDir/agents.
	DataDir string
	// Source is the registry's URL (http:// or https://) or a file's
	// path; empty is DefaultRegistryURL.
	Source string
	// HTTPClient fetches the registry and binary archives; nil is a
	// client with connect and response-header timeouts.
	HTTPClient *http.Client
	// FetchTimeout bounds the registry's fetch; zero is
	// DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Now is the clock (fetch and install times); nil is time.Now.
	Now func() time.Time
}

// Catalog is the registry as Load found it, and where it came from;
// Install, Upgrade and the rest use its data directory, HTTP client and
// clock. Only Load makes one.
type Catalog struct {
	// Registry is the registry, fetched now or read from the cache.
	Registry *Registry
	// Source is the URL or file the registry is of.
	Source string
	// FetchedAt is when the registry was fetched: now, or when the
	// cached copy was.
	FetchedAt time.Time
	// FromCache says the registry is the cached copy, because the
	// source could not be reached (FetchErr says why).
	FromCache bool
	// FetchErr is why the source was not read; nil unless FromCache.
	FetchErr error

	dataDir string
	client  *http.Client
	now     func() time.Time
}

// Age is how old the registry is: zero when just fetched, the time
// since the cached copy was fetched otherwise.
func (c *Catalog) Age() time.Duration { return c.now().Sub(c.FetchedAt) }

// DataDir is the data directory the catalog installs into.
func (c *Catalog) DataDir() string { return c.dataDir }

// StatusError is a registry or archive URL that answered with a status
// other than 200 OK.
type StatusError struct {
	URL    string
	Status string // "404 Not Found"
	Code   int
}

func (e *StatusError) Error() string { return fmt.Sprintf("GET %s: %s", e.URL, e.Status) }

// cacheMeta is the cache's sidecar: the registry file is kept exactly as
// fetched (readable, and its errors' lines are the source's), and this
// says where and when it was fetched. The two files cannot be replaced
// in one step, so the sidecar holds the registry's hash: a sidecar that
// does not describe the file beside it is no cache.
type cacheMeta struct {
	Source    string    `json:"source"`
	FetchedAt time.Time `json:"fetchedAt"`
	SHA256    string    `json:"sha256"`
}

// Load reads the registry from its source and caches it in
// DataDir/agents. When the source is a URL that cannot be reached (the
// connection refused, a timeout, DNS, TLS) or that answers with an error
// status, Load uses the cached copy of that same source, with FromCache
// set and FetchErr saying why; with no such copy, it fails naming both.
// A registry that Parse refuses is an error (a *ParseError inside), from
// the network or not, and never replaces the cache. A file source is
// read, never fallen back from. Load ends early when ctx does.
func Load(ctx context.Context, opts Options) (*Catalog, error) {
	if opts.DataDir == "" {
		return nil, errors.New("load agent registry: no data directory")
	}
	c := &Catalog{
		Source:  opts.Source,
		dataDir: opts.DataDir,
		client:  opts.HTTPClient,
		now:     opts.Now,
	}
	if c.Source == "" {
		c.Source = DefaultRegistryURL
	}
	if c.client == nil {
		c.client = defaultHTTPClient()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if isURL(c.Source) {
		if u, err := url.Parse(c.Source); err != nil || u.Host == "" {
			return nil, fmt.Errorf("load agent registry: %q is not a URL", c.Source)
		}
	}
	timeout := opts.FetchTimeout
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}

	data, err := c.read(ctx, timeout)
	if err != nil {
		var unreachable *unreachableError
		if !errors.As(err, &unreachable) {
			return nil, fmt.Errorf("load agent registry: %w", err)
		}
		reg, meta, cerr := readCache(agentsDir(c.dataDir), c.Source)
		if cerr != nil {
			return nil, fmt.Errorf("load agent registry: %w; no cached copy to use instead: %w", unreachable.err, cerr)
		}
		c.Registry, c.FetchedAt, c.FromCache, c.FetchErr = reg, meta.FetchedAt, true, unreachable.err
		return c, nil
	}
	reg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load agent registry: parse %s: %w", c.Source, err)
	}
	c.Registry, c.FetchedAt = reg, c.now()
	if err := writeCache(agentsDir(c.dataDir), data, cacheMeta{Source: c.Source, FetchedAt: c.FetchedAt}); err != nil {
		return nil, fmt.Errorf("load agent registry: %w", err)
	}
	return c, nil
}

// unreachableError is a fetch that failed for want of a network or a
// working server: the failures the cache stands in for.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// read reads the registry's bytes from its URL or file.
func (c *Catalog) read(ctx context.Context, timeout time.Duration) ([]byte, error) {
	if !isURL(c.Source) {
		if strings.Contains(c.Source, "://") {
			return nil, fmt.Errorf("registry source %s: only http, https and file paths are read", c.Source)
		}
		b, err := readLimited(c.Source)
		if err != nil {
			return nil, fmt.Errorf("read registry: %w", err)
		}
		return b, nil
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := get(fctx, c.client, c.Source, maxRegistrySize)
	if err != nil {
		if ctx.Err() != nil { // the caller's end, not the network's
			return nil, fmt.Errorf("fetch %s: %w", c.Source, context.Cause(ctx))
		}
		var status *StatusError
		var tooBig *tooLargeError
		if errors.As(err, &tooBig) || (!errors.As(err, &status) && !isTransportError(err)) {
			return nil, err
		}
		return nil, &unreachableError{err}
	}
	return b, nil
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// isTransportError says err came from reaching the server (dialing, DNS,
// TLS, a timeout, a connection cut while the body was read).
func isTransportError(err error) bool {
	var uerr *url.Error
	var rerr *bodyError
	return errors.As(err, &uerr) || errors.As(err, &rerr)
}

// bodyError is a response body that broke off.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// tooLargeError is a response or file larger than its bound.
type tooLargeError struct {
	what  string
	limit int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d MiB", e.what, e.limit>>20)
}

// get fetches a URL's body, at most limit bytes of it.
func get(ctx context.Context, client *http.Client, rawURL string, limit int64) ([]byte, error) {
	resp, err := open(ctx, client, rawURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &bodyError{fmt.Errorf("read %s: %w", rawURL, err)}
	}
	if int64(len(b)) > limit {
		return nil, &tooLargeError{what: rawURL, limit: limit}
	}
	return b, nil
}

// open sends a GET and returns a 200's response; another status is a
// *StatusError.
func open(ctx context.Context, client *http.Client, rawURL string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %v", rawURL, err) // not a *url.Error: no network was tried
	}
	req.Header.Set("User-Agent", "baton")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err // a *url.Error naming the method and URL
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &StatusError{URL: rawURL, Status: resp.Status, Code: resp.StatusCode}
	}
	return resp, nil
}

// defaultHTTPClient bounds the parts of a request that wait on the
// network without bounding a large download's body, which only ctx ends.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRegistrySize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxRegistrySize {
		return nil, &tooLargeError{what: path, limit: maxRegistrySize}
	}
	return b, nil
}

// writeCache keeps data as the cached registry of meta.Source: the file
// first, then the sidecar that vouches for it.
func writeCache(dir string, data []byte, meta cacheMeta) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cache registry: %w", err)
	}
	sum := sha256.Sum256(data)
	meta.SHA256 = hex.EncodeToString(sum[:])
	m, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("cache registry: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, cacheFile), data); err != nil {
		return fmt.Errorf("cache registry: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, metaFile), append(m, '\n')); err != nil {
		return fmt.Errorf("cache registry: %w", err)
	}
	return nil
}

// readCache reads the cached registry, if it is one of source.
func readCache(dir, source string) (*Registry, cacheMeta, error) {
	var meta cacheMeta
	m, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, meta, fmt.Errorf("read cached registry: %w", err)
	}
	if err := json.Unmarshal(m, &meta); err != nil {
		return nil, meta, fmt.Errorf("read cached registry: %s: %w", filepath.Join(dir, metaFile), err)
	}
	if meta.Source != source {
		return nil, meta, fmt.Errorf("the cached registry is of %s, not %s", meta.Source, source)
	}
	data, err := readLimited(filepath.Join(dir, cacheFile))
	if err != nil {
		return nil, meta, fmt.Errorf("read cached registry: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != meta.SHA256 {
		return nil, meta, fmt.Errorf("read cached registry: %s is not the file %s describes (an interrupted update?)",
			filepath.Join(dir, cacheFile), metaFile)
	}
	reg, err := Parse(data)
	if err != nil {
		return nil, meta, fmt.Errorf("read cached registry %s: %w", filepath.Join(dir, cacheFile), err)
	}
	return reg, meta, nil
}
