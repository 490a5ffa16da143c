package sdk

import "testing"

func TestRelPath(t *testing.T) {
	for _, tc := range []struct{ cwd, p, want string }{
		{"/ws", "/ws/a/b.txt", "a/b.txt"},
		{"/ws", "/ws/..hidden", "..hidden"},
		{"/ws", "/ws", "."},
		{"/ws", "/other/x", "/other/x"},
		{"/ws", "/ws2/x", "/ws2/x"},
		{"/ws", "/", "/"},
		{"/ws", "/ws/../x", "/ws/../x"},
		{"/ws", "rel/x", "rel/x"},
		{"", "/ws/x", "/ws/x"},
	} {
		if got := RelPath(tc.cwd, tc.p); got != tc.want {
			t.Errorf("RelPath(%q, %q) = %q, want %q", tc.cwd, tc.p, got, tc.want)
		}
	}
}
