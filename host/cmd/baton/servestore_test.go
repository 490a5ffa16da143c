package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// serve refuses the flags of a shared store it cannot use before it
// starts: a bad value is bad usage naming its flag (exit 2), a secret
// file others may read fails naming the fix (exit 1).
func TestServeRefusesBadStoreFlags(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	loose := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(loose, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const store = "nats://127.0.0.1:1"
	type result struct {
		Code int
		Says string
	}
	for _, c := range []struct {
		args []string
		want result
	}{
		{[]string{"--store", "127.0.0.1:4222"}, result{exitUsage, `baton: serve: --store: want nats://HOST:PORT[,HOST:PORT...], got "127.0.0.1:4222"`}},
		{[]string{"--store", "nats://127.0.0.1:4222,127.0.0.1"}, result{exitUsage, `baton: serve: --store: "127.0.0.1" is not HOST:PORT`}},
		{[]string{"--store", "nats://127.0.0.1:99999"}, result{exitUsage, `baton: serve: --store: "nats://127.0.0.1:99999": the port must be a number from 1 to 65535`}},
		{[]string{"--nats-creds", loose}, result{exitUsage, "baton: serve: --nats-creds needs --store nats://HOST:PORT"}},
		{[]string{"--store", store, "--nats-replicas", "-1"}, result{exitUsage, "baton: serve: --nats-replicas must be from 0 (the default), got -1"}},
		{[]string{"--store", store, "--lease-ttl", "500ms"}, result{exitUsage, "baton: serve: --lease-ttl must be at least 1s, got 500ms"}},
		{[]string{"--store", store, "--nats-tls-cert", "c.pem"}, result{exitUsage, "baton: serve: give both --nats-tls-cert and --nats-tls-key, or neither"}},
		{[]string{"--store", store, "--installation", "a.b"}, result{exitUsage, `baton: serve: --installation: installation name "a.b": use 1 to 64 letters, digits, - and _`}},
		{[]string{"--store", store, "--host", "a b"}, result{exitUsage, `baton: serve: --host: host name "a b": use 1 to 64 letters, digits, - and _`}},
		{[]string{"--store", store, "--host", "b.local"}, result{exitUsage, `baton: serve: --host: host name "b.local": use 1 to 64 letters, digits, - and _`}},
		{[]string{"--store", store, "--nats-token-file", loose}, result{exitFailed,
			"baton: serve: --nats-token-file: " + loose + " is mode 0644: others than its owner may read or change it; chmod 600 " + loose}},
		{[]string{"--store", store, "--nats-creds", loose}, result{exitFailed,
			"baton: serve: --nats-creds: " + loose + " is mode 0644: others than its owner may read or change it; chmod 600 " + loose}},
	} {
		_, errOut, code := baton(t, append([]string{"serve", "--data", data}, c.args...)...)
		got := result{code, errOut}
		if len(errOut) > 0 {
			got.Says = errOut[:len(errOut)-1]
			if i := len(c.want.Says); len(got.Says) > i && got.Says[i] == '\n' {
				got.Says = got.Says[:i] // the usage hint that follows
			}
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("serve %v (-want +got):\n%s", c.args, d)
		}
	}
}

// A verb on the data dir of a host whose log is shared (its replica is
// there) and whose service does not answer embeds no host of its own: it
// would write a private log beside the shared one, or read an empty one.
func TestVerbsRefuseASharedLogsDataDir(t *testing.T) {
	data := t.TempDir()
	os.Chmod(data, 0o700)
	if err := os.Mkdir(filepath.Join(data, replicaDir), 0o700); err != nil {
		t.Fatal(err)
	}
	want := "baton: the data dir " + data + " is a host's of a log shared in NATS JetStream (" + filepath.Join(data, replicaDir) +
		"), and no service answers on it (its baton serve is stopped): start it, or reach another host of the installation with --server ADDRESS\n"
	for _, args := range [][]string{{"threads"}, {"run", "--provider", "exec", "hello"}} {
		_, errOut, code := baton(t, append([]string{"--data", data}, args...)...)
		if d := cmp.Diff([]any{exitFailed, want}, []any{code, errOut}); d != "" {
			t.Errorf("baton %v (-want +got):\n%s", args, d)
		}
		if _, err := os.Stat(filepath.Join(data, "events")); err == nil {
			t.Errorf("baton %v made DATA/events", args)
		}
	}
}
