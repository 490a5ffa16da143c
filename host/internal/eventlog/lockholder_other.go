//go:build !unix

package eventlog

// LockHolder says whether another process holds the store's lock; where
// fcntl locks do not exist it cannot tell, and says none does.
func LockHolder(dir string) (held bool, pid int, err error) { return false, 0, nil }
