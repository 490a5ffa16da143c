package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The modes of everything the store writes: its files hold the threads'
// messages in the clear, so they are their owner's alone, whatever the
// data dir's mode and the process's umask (which Baton leaves alone: the
// checkpoints it restores are the user's own files, with the user's
// modes).
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// privateFS is Pebble's file system with Baton's modes: Pebble makes its
// directories 0755 and its files 0666, less the umask. Every file it makes
// or opens for writing, and every directory, is made private as it is
// made; and once the store's lock is held, the files an older Baton left
// (0644) are made private too.
//
// A file is made private just after it is made (Pebble's Create picks the
// mode): its directory is private by then, so no one else can reach it in
// between.
type privateFS struct{ vfs.FS }

// privateDefault is the store's file system: the operating system's, made
// private.
var privateDefault vfs.FS = privateFS{vfs.Default}

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	return privateFile(name, f, err)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	return privateFile(name, f, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	return privateFile(newname, f, err)
}

// MkdirAll makes dir (and its missing parents) 0700. A directory that was
// there already is left as it is: Lock makes an older store private, and
// tells one by its directory's mode.
func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, dirMode)
}

// Lock takes the store's lock, then makes a store an older Baton wrote
// (a 0755 directory of 0644 files) private. A store whose directory is
// 0700 is private already (its directory is made private last), so an
// open does not read the whole directory every time.
func (p privateFS) Lock(name string) (io.Closer, error) {
	l, err := p.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	err = chmod(name, fileMode) // the lock file itself, which Lock makes
	if err == nil {
		err = makePrivate(filepath.Dir(name))
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }

// privateFile makes a file that was just made or opened private; on a
// failure it closes the file.
func privateFile(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if err := chmod(name, fileMode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// makePrivate makes dir, and every directory and file under it, private,
// unless dir is private already. dir is made private last, so a repair
// that stops part-way is taken up again by the next open. Symbolic links
// are left alone (a chmod would change what they point to).
func makePrivate(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("make the event log private: %w", err)
	}
	if fi.Mode().Perm() == dirMode {
		return nil
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed while we walked (an obsolete file Pebble deleted)
		case err != nil:
			return fmt.Errorf("make the event log private: %w", err)
		case path == dir:
		case d.IsDir():
			err = chmod(path, dirMode)
		case d.Type().IsRegular():
			err = chmod(path, fileMode)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return chmod(dir, dirMode)
}

// chmod sets a file's permission bits unless they are set already.
func chmod(name string, mode fs.FileMode) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return fmt.Errorf("make %s private: %w", name, err)
	}
	if fi.Mode().Perm() == mode {
		return nil
	}
	if err := os.Chmod(name, mode); err != nil {
		return fmt.Errorf("make %s private: %w", name, err)
	}
	return nil
}

// readOnlyFS is the file system of a store opened read-only: the
// operating system's, where nothing is made, changed or removed, and the
// lock is not taken. Pebble takes the directory's lock even to open it
// read-only, and its lock makes the LOCK file: on a read-only file system
// that fails (EROFS), and while another process holds the store it is
// refused (EAGAIN). A reader needs neither: it changes nothing. Any write
// Pebble would still try is refused with ErrReadOnly, so a read-only open
// cannot write by mistake.
type readOnlyFS struct{ vfs.FS }

// lockName is Pebble's lock file in the store's directory.
const lockName = "LOCK"

// readOnlyDefault is a read-only store's file system.
var readOnlyDefault vfs.FS = readOnlyFS{vfs.Default}

func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, refuseWrite("create", name)
}

func (readOnlyFS) Link(oldname, _ string) error { return refuseWrite("link", oldname) }

func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, refuseWrite("open for writing", name)
}

func (readOnlyFS) Remove(name string) error    { return refuseWrite("remove", name) }
func (readOnlyFS) RemoveAll(name string) error { return refuseWrite("remove", name) }
func (readOnlyFS) Rename(oldname, _ string) error {
	return refuseWrite("rename", oldname)
}

func (readOnlyFS) ReuseForWrite(oldname, _ string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, refuseWrite("reuse", oldname)
}

func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error { return refuseWrite("make", dir) }

// Lock takes no lock: see readOnlyFS.
func (readOnlyFS) Lock(string) (io.Closer, error) { return noLock{}, nil }

func (p readOnlyFS) Unwrap() vfs.FS { return p.FS }

type noLock struct{}

func (noLock) Close() error { return nil }

func refuseWrite(what, name string) error {
	return fmt.Errorf("%s %s: %w", what, name, ErrReadOnly)
}

// Lock takes the store's lock in dir, as an open for writing does, for a
// caller that changes the store without opening it (a rebuild that puts
// another store in its place). Another process that holds it refuses
// with EAGAIN.
func Lock(dir string) (io.Closer, error) {
	l, err := pebble.LockDirectory(dir, privateDefault)
	if err != nil {
		return nil, fmt.Errorf("lock event log %s: %w", dir, err)
	}
	return l, nil
}
