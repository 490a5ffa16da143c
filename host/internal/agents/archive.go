package agents

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file extracts an agent's archive into its install directory, so
// that nothing in the archive can reach outside it:
//
//   - every write goes through an os.Root of the directory, which no
//     path or symlink leaves;
//   - an entry's name is refused when it is absolute, has a '..' element
//     or a backslash, or lies under a symlink the archive made (so a path
//     means what it says);
//   - a symlink's target is refused unless it is relative and its '..'
//     elements lead it, no more of them than the link is deep: it points
//     inside, whatever else the archive holds;
//   - a hard link must name a file the archive made;
//   - files keep their permission bits (executables stay executable),
//     never set-id bits; devices, FIFOs and the like are refused;
//   - sizes and entry counts are bounded (maxExtractedSize, maxEntries).

// archiveFormat is how an archive is packed, from its URL's suffix.
type archiveFormat int

const (
	formatBare archiveFormat = iota // the executable itself
	formatTarGz
	formatTar
	formatZip
)

// maxExtractedSize bounds what an archive extracts to (a compression
// bomb's defence); maxEntries bounds its entries.
const (
	maxExtractedSize = 4 << 30
	maxEntries       = 100_000
)

// unsupportedSuffixes are archives and compressions this code does not
// read: better refused than installed as if each were the executable.
var unsupportedSuffixes = []string{".tar.xz", ".txz", ".xz", ".tar.zst", ".tzst", ".zst", ".tar.bz2", ".tbz2", ".tbz", ".bz2", ".gz", ".7z", ".rar", ".dmg", ".pkg", ".msi", ".deb", ".rpm"}

// formatOf is the format of an archive at a URL path: .tar.gz or .tgz,
// .tar, .zip (what the registry's agents publish); any other suffix but
// the unsupported ones is the executable itself.
func formatOf(urlPath string) (archiveFormat, error) {
	p := strings.ToLower(urlPath)
	has := func(suffixes ...string) bool {
		return slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(p, s) })
	}
	switch {
	case has(".tar.gz", ".tgz"):
		return formatTarGz, nil
	case has(".tar"):
		return formatTar, nil
	case has(".zip"):
		return formatZip, nil
	case has(unsupportedSuffixes...):
		return 0, fmt.Errorf("unsupported archive format (baton reads .tar.gz, .tgz, .tar, .zip or a bare executable)")
	}
	return formatBare, nil
}

// extract unpacks f (size bytes, in format) into dir, where cmd (a path
// from localPath) must then be a regular file; it is made executable if
// it is not.
func extract(f *os.File, size int64, format archiveFormat, dir, cmd string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root, links: map[string]bool{}, files: map[string]bool{}}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	switch format {
	case formatBare:
		err = x.file(cmd, 0o755, f)
	case formatTarGz:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(f); err == nil {
			err = x.tar(zr)
		}
	case formatTar:
		err = x.tar(f)
	case formatZip:
		err = x.zip(f, size)
	}
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	fi, err := root.Stat(cmd)
	if err != nil {
		return fmt.Errorf("the command %s is not in the archive: %w", filepath.ToSlash(cmd), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("the command %s is not a file (%s)", filepath.ToSlash(cmd), fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o100 == 0 { // a zip made without Unix modes
		if err := root.Chmod(cmd, fi.Mode().Perm()|0o755); err != nil {
			return fmt.Errorf("make %s executable: %w", filepath.ToSlash(cmd), err)
		}
	}
	return nil
}

// extractor writes entries into its root, keeping count.
type extractor struct {
	root    *os.Root
	written int64
	entries int
	links   map[string]bool // the symlinks made, by cleaned path
	files   map[string]bool // the regular files made
}

// name checks an entry's name: a path inside the root that lies under
// none of the archive's symlinks; "" is the root itself.
func (x *extractor) name(raw string) (string, error) {
	x.entries++
	if x.entries > maxEntries {
		return "", fmt.Errorf("more than %d entries", maxEntries)
	}
	name, err := localPath(raw)
	if err != nil {
		return "", fmt.Errorf("entry %w", err)
	}
	for dir := filepath.Dir(name); dir != "."; dir = filepath.Dir(dir) {
		if x.links[dir] {
			return "", fmt.Errorf("entry %q lies under the symlink %s", raw, filepath.ToSlash(dir))
		}
	}
	return name, nil
}

func (x *extractor) mkdirs(name string) error {
	if dir := filepath.Dir(name); dir != "." {
		return x.root.MkdirAll(dir, 0o755)
	}
	return nil
}

// file writes a regular file with perm's permission bits.
func (x *extractor) file(name string, perm fs.FileMode, r io.Reader) error {
	if err := x.mkdirs(name); err != nil {
		return err
	}
	out, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm.Perm())
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(r, maxExtractedSize-x.written+1))
	x.written += n
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.ToSlash(name), err)
	}
	if x.written > maxExtractedSize {
		return fmt.Errorf("extracts to more than %d GiB", maxExtractedSize>>30)
	}
	x.files[name] = true
	return nil
}

// symlink makes a symlink whose target points inside the root.
func (x *extractor) symlink(name, target string) error {
	if err := checkLinkTarget(name, target); err != nil {
		return err
	}
	if err := x.mkdirs(name); err != nil {
		return err
	}
	if err := x.root.Symlink(target, name); err != nil {
		return err
	}
	x.links[name] = true
	return nil
}

// checkLinkTarget refuses a symlink target that could point outside the
// root: absolute, or with '..' anywhere but leading, or more leading
// '..' than the link is deep. Entries never lie under a symlink (name),
// so the link's directory is a real one and its leading '..' climb real
// directories; the rest descends, through links that each point inside.
func checkLinkTarget(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || filepath.IsAbs(target) || strings.Contains(target, `\`) {
		return fmt.Errorf("symlink %s: target %q is not a relative path", filepath.ToSlash(name), target)
	}
	elems := strings.Split(target, "/")
	up := 0
	for up < len(elems) && elems[up] == ".." {
		up++
	}
	if slices.Contains(elems[up:], "..") {
		return fmt.Errorf("symlink %s: target %q has a '..' after its start", filepath.ToSlash(name), target)
	}
	if depth := strings.Count(filepath.ToSlash(name), "/"); up > depth {
		return fmt.Errorf("symlink %s: target %q points outside the archive", filepath.ToSlash(name), target)
	}
	return nil
}

// hardlink links name to a regular file the archive made.
func (x *extractor) hardlink(name, target string) error {
	old, err := localPath(target)
	if err != nil || !x.files[old] {
		return fmt.Errorf("hard link %s: target %q is not a file of the archive", filepath.ToSlash(name), target)
	}
	if err := x.mkdirs(name); err != nil {
		return err
	}
	if err := x.root.Link(old, name); err != nil {
		return err
	}
	x.files[name] = true
	return nil
}

func (x *extractor) tar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // pax metadata for the archive, not an entry
		}
		name, err := x.name(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.root.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = x.file(name, hdr.FileInfo().Mode(), tr)
		case tar.TypeSymlink:
			err = x.symlink(name, hdr.Linkname)
		case tar.TypeLink:
			err = x.hardlink(name, hdr.Linkname)
		default:
			err = fmt.Errorf("entry %s: unsupported type %q", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func (x *extractor) zip(f *os.File, size int64) error {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return err
	}
	for _, zf := range zr.File {
		name, err := x.name(zf.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			err = x.root.MkdirAll(name, 0o755)
		case mode&fs.ModeSymlink != 0:
			err = x.zipSymlink(name, zf)
		case mode.IsRegular():
			err = x.zipFile(name, zf)
		default:
			err = fmt.Errorf("entry %s: unsupported type %s", zf.Name, mode.Type())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) zipFile(name string, zf *zip.File) error {
	rc, err := zf.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	return x.file(name, zf.Mode(), rc)
}

// zipSymlink makes a zip's symlink, whose target is its content.
func (x *extractor) zipSymlink(name string, zf *zip.File) error {
	rc, err := zf.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return err
	}
	return x.symlink(name, string(target))
}
