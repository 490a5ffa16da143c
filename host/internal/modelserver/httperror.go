package modelserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// write sends the scripted error, its "{{RESET}}" and "{{RESET_ISO}}"
// placeholders (in header values and the body) replaced by the reset
// instant ResetInSeconds after now. A body value that is the JSON string
// "{{RESET}}" becomes the JSON number (codex reads error.resets_at as an
// integer and ignores the whole body otherwise).
func (e *HTTPError) write(w http.ResponseWriter, now time.Time) {
	reset := now.Add(time.Duration(e.ResetInSeconds) * time.Second).UTC()
	unix := strconv.FormatInt(reset.Unix(), 10)
	fill := strings.NewReplacer(`"{{RESET}}"`, unix, "{{RESET}}", unix, "{{RESET_ISO}}", reset.Format(time.RFC3339)).Replace
	for k, v := range e.Headers {
		w.Header().Set(k, fill(v))
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(fill(string(e.Body))))
}

// errorRepeats is a scripted error that more main calls still get
// (HTTPError.Repeat), the script untouched: an agent that retries a 429
// on its own sees it again. A server holds one, under its lock.
type errorRepeats struct {
	err  *HTTPError
	left int
}

// serve makes e the error to repeat, Repeat more times.
func (r *errorRepeats) serve(e *HTTPError) { r.err, r.left = e, max(e.Repeat, 0) }

// again is the error a retry gets, if one is left.
func (r *errorRepeats) again() (*HTTPError, bool) {
	if r.left <= 0 {
		return nil, false
	}
	r.left--
	return r.err, true
}
