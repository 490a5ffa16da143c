package opencode

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-run/baton/sdk"
)

func TestConfigEnv(t *testing.T) {
	t.Setenv("OPENCODE_CONFIG_CONTENT", `{"model":"from/plugin-env"}`)
	perm, err := permissionPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env       []string
		wantModel string
	}{
		{nil, "from/plugin-env"},
		{[]string{`OPENCODE_CONFIG_CONTENT={"model":"from/command","permission":{"bash":"allow"}}`}, "from/command"},
	} {
		kv, err := configEnv(tc.env, perm, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := strings.CutPrefix(kv, "OPENCODE_CONFIG_CONTENT=")
		var cfg struct {
			Model      string            `json:"model"`
			Permission map[string]string `json:"permission"`
		}
		if !ok || json.Unmarshal([]byte(v), &cfg) != nil || cfg.Model != tc.wantModel || cfg.Permission["bash"] != "ask" || cfg.Permission["edit"] != "ask" {
			t.Errorf("env %q: got %s", tc.env, kv)
		}
	}
	if _, err := configEnv([]string{"OPENCODE_CONFIG_CONTENT=[1]"}, perm, nil); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a config that is not an object: %v", err)
	}
	if _, err := permissionPolicy("sometimes"); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("an unknown policy: %v", err)
	}
	if p, _ := permissionPolicy("allow"); p["bash"] != "allow" || p["edit"] != "allow" {
		t.Errorf("allow policy %v", p)
	}
}
