package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/modelserver"
)

func TestNewServerAPIs(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.json")
	if err := os.WriteFile(script, []byte(`[[{"type":"text","text":"hi"}]]`), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := newServer("anthropic", script, 0, "OK", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*modelserver.Server); !ok {
		t.Fatalf("anthropic: %T", a)
	}
	o, err := newServer("openai-responses", script, 0, "OK", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.(*modelserver.ResponsesServer); !ok {
		t.Fatalf("openai-responses: %T", o)
	}
	g, err := newServer("gemini", script, 0, "OK", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.(*modelserver.GeminiServer); !ok {
		t.Fatalf("gemini: %T", g)
	}
	ts := httptest.NewServer(o)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := newServer("bogus", "", 0, "OK", nil, nil); err == nil || !strings.Contains(err.Error(), "unknown --api") {
		t.Fatalf("bogus api: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[[{"type":"tool_use","name":"x"}]]`), 0o644)
	if _, err := newServer("openai-responses", bad, 0, "OK", nil, nil); err == nil {
		t.Fatal("want script error for a Messages block in a Responses script")
	}
	if _, err := newServer("gemini", bad, 0, "OK", nil, nil); err == nil {
		t.Fatal("want script error for a Messages block in a Gemini script")
	}
}
