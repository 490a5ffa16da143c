package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/framelog"
)

// callTimeout bounds one request; opencode answers prompt_async, abort and
// permission replies at once (the turn goes on in events).
const callTimeout = 30 * time.Second

// httpError is a response with a status that is not a success.
type httpError struct {
	method, path string
	status       int
	body         string
}

func (e *httpError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("%s %s: status %d", e.method, e.path, e.status)
	}
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, sdk.Printable(sdk.Clip(e.body, maxBody, false)))
}

// maxBody is how much of a failure's body an error quotes (its start: an
// explanation, which may name what was sent): a server that answers with
// a page of HTML, or megabytes, must not put it all in a run's failure.
const maxBody = 1 << 10

// quoteBody quotes an answer that is not what was expected, for an error:
// its first 200 bytes, escaped, with its length when cut.
func quoteBody(b []byte) string {
	const n = 200
	q := strconv.Quote(sdk.Clip(string(b), n, false))
	if len(b) > n {
		q += fmt.Sprintf(" (%d bytes in all)", len(b))
	}
	return q
}

func requestFrame(method, path string, body []byte) []byte {
	f := map[string]any{"method": method, "path": path}
	if len(body) > 0 {
		f["body"] = json.RawMessage(body)
	}
	b, _ := json.Marshal(f)
	return b
}

// call sends one request and decodes a JSON answer into out (when not
// nil). Both go to the raw-frame log. It returns the status.
func (s *session) call(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	s.proc.Frames.Append(framelog.Out, requestFrame(method, path, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	rf, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "body": string(rb)})
	s.lastResp.Store(s.proc.Frames.Append(framelog.In, rf))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, &httpError{method: method, path: path, status: resp.StatusCode, body: strings.TrimSpace(string(rb))}
	}
	if out != nil && len(bytes.TrimSpace(rb)) > 0 {
		if err := json.Unmarshal(rb, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: the answer is not what was expected (%w): %s", method, path, err, quoteBody(bytes.TrimSpace(rb)))
		}
	}
	return resp.StatusCode, nil
}
