package service_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-run/baton/host/internal/service"
)

// A Connect stream with nothing to send yet answers its headers at once:
// the page learns from them that its Subscribe is open (it shows itself
// live), on a service where nothing happens.
func TestWebSubscribeHeadersAtOnce(t *testing.T) {
	data := filepath.Join(shortDir(t), "data")
	s := serve(t, service.Config{DataDir: data, Listen: []string{"tcp://127.0.0.1:0"}})
	base := "http://" + strings.TrimPrefix(s.addrs[1], "tcp://")
	c := webClient(nil)
	c.Timeout = 0
	cookie, _, _ := signIn(t, c, loginCode(t, data, "").GetUrl())
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/baton.v1.Baton/Subscribe", strings.NewReader(envelope(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/connect+json"}, "Connect-Protocol-Version": {"1"}, "Cookie": {cookie}, "Origin": {base}}
	resp, err := c.Do(req) // returns once the headers are in
	if err != nil {
		t.Fatalf("Subscribe of a quiet service: no headers: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Subscribe of a quiet service: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
