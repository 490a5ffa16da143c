package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/baton-run/baton/sdk/clock"
)

// Timeout bounds one try, on the host's clock: from the request's start
// to the end of the answer's headers.
const Timeout = 10 * time.Second

// maxAnswer is how much of a receiver's answer is read (and dropped), so
// that its connection can be used again.
const maxAnswer = 64 << 10

// sender POSTs one delivery.
type sender struct {
	client *http.Client
	secret []byte
	clock  clock.Clock
}

// newSender makes a sender; client nil: one of its own, which follows no
// redirect (a receiver that moved says so with a failure, not by getting
// the body somewhere else).
func newSender(client *http.Client, secret []byte, c clock.Clock) *sender {
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &sender{client: client, secret: secret, clock: clock.Or(c)}
}

// refusal is a target's answer that is not 2xx.
type refusal struct {
	status string
	code   int
}

func (r *refusal) Error() string { return "the receiver answered " + r.status }

// forGood says whether the same request can never succeed: a 4xx other
// than 408 (timeout) and 429 (too many requests) says the request itself
// is wrong, and sending the same bytes again cannot change that.
func (r *refusal) forGood() bool {
	return r.code >= 400 && r.code < 500 && r.code != http.StatusRequestTimeout && r.code != http.StatusTooManyRequests
}

// errTimeout is a try that Timeout ended.
var errTimeout = fmt.Errorf("no answer within %s", Timeout)

// post sends one try of a delivery: nil once the target answered 2xx; a
// *refusal for another answer; else what stopped it (errTimeout, the
// connection's error, or ctx's cause when ctx ended).
func (s *sender) post(ctx context.Context, target, id string, body []byte) error {
	tctx, cancel := clock.WithTimeout(ctx, s.clock, Timeout, errTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(tctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("make the request: %w", err) // unreachable: targets are checked URLs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "baton-webhook")
	req.Header.Set(IDHeader, id)
	if len(s.secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(s.secret, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if cause := context.Cause(tctx); cause != nil {
			return cause
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without "Post URL:": the list names the target
		}
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &refusal{status: resp.Status, code: resp.StatusCode}
	}
	return nil
}
