package orchestrator

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// The data dir is its owner's alone: it holds the threads' messages in the
// clear. Everything the host writes in it is 0600 (directories 0700)
// whatever the umask; the data dir itself, and the parents it lacked, are
// made 0700. A data dir that was there already keeps its mode (it is the
// user's to choose), and CheckDataDir says when others may reach it.

// CheckDataDir says who other than its owner may reach the data dir, as an
// error naming it and its mode ("data dir D is readable and searchable by
// its group and others (mode 0755)"); nil when no one may.
func CheckDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	m := fi.Mode().Perm()
	if m&0o077 == 0 {
		return nil
	}
	group, others := access(m>>3&7), access(m&7)
	var who string
	switch {
	case group == others:
		who = group + " by its group and others"
	case others == "":
		who = group + " by its group"
	case group == "":
		who = others + " by others"
	default:
		who = group + " by its group and " + others + " by others"
	}
	return fmt.Errorf("data dir %s is %s (mode %04o)", dir, who, m)
}

// access says what three permission bits allow: "readable, writable and
// searchable".
func access(bits fs.FileMode) string {
	var can []string
	for _, b := range []struct {
		bit  fs.FileMode
		word string
	}{{4, "readable"}, {2, "writable"}, {1, "searchable"}} {
		if bits&b.bit != 0 {
			can = append(can, b.word)
		}
	}
	if len(can) < 2 {
		return strings.Join(can, "")
	}
	return strings.Join(can[:len(can)-1], ", ") + " and " + can[len(can)-1]
}

// holdDataDir does what a host does once it holds the data dir (its event
// log's lock): it records itself in the pid file and makes the raw-frame
// logs' directory private. On a failure it closes the store.
func holdDataDir(cfg Config, store eventlog.Log) error {
	err := writeHolder(cfg.DataDir, cfg.Command, cfg.Clock.Now())
	if err == nil {
		err = privateDir(filepath.Join(cfg.DataDir, "rawframes"))
	}
	if err != nil {
		removeHolder(cfg.DataDir)
		store.Close()
		return err
	}
	return nil
}

// privateDir makes dir 0700, if it is missing or was made with another
// mode (by an older Baton, or under another umask).
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}
