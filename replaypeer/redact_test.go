package main

import "testing"

// A map keyed by path (codex-acp's rawInput "changes") leaves no machine
// path behind: keys are redacted as values are.
func TestRedactorRedactsKeys(t *testing.T) {
	r := &redactor{workspace: "/tmp/ws", home: "/root/h"}
	got := string(r.frame([]byte(`{"changes":{"/tmp/ws/a.txt":{"path":"/tmp/ws/a.txt"},"/root/h/.x":1,"plain":2}}`)))
	want := `{"changes":{"/home/user/.x":1,"<workspace>/a.txt":{"path":"<workspace>/a.txt"},"plain":2}}`
	if got != want {
		t.Errorf("redacted frame:\n got %s\nwant %s", got, want)
	}
}
