package orchestrator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkCwd says why a thread's working directory cannot be worked in:
// "/x does not exist", "/x is not a directory". A thread is refused one
// before anything is written, and a thread whose directory went away since
// fails its run saying so (not with the provider's start failing in it).
func checkCwd(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s does not exist", dir)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: %w", dir, err) // "/x: permission denied"
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}
