package checkpoint

import (
	"strings"
	"testing"
)

// FuzzParseSummary feeds git diff-tree output (the -z --raw --numstat
// form) to the parsers: they return an error or a summary, never panic,
// and every file they report has a path and a known kind. The corpus in
// testdata/fuzz/FuzzParseSummary is real git output between trees with an
// edit, a binary file ("-\t-"), a mode and a type change, a rename (as
// capture asks, a deletion and an addition; and as -M reports it), names
// with a space, a tab, a newline, a quote and non-ASCII letters, plus the
// quoted form git writes without -z.
func FuzzParseSummary(f *testing.F) {
	f.Add([]byte(":000000 100644 0000000000000000000000000000000000000000 d00491fd7e5bb6fa28c517a0bb32b8b506539d4d A\x00a.txt\x002\t0\ta.txt\x00"))
	f.Add([]byte(":100644 100755 d00491fd7e5bb6fa28c517a0bb32b8b506539d4d d00491fd7e5bb6fa28c517a0bb32b8b506539d4d M\x00x\x00-\t-\tx\x00"))
	f.Add([]byte(":100644 000000 d00491f 0000000 D\x00gone\x000\t3\tgone\x00"))
	f.Add([]byte(":120000 100644 a b T\x00l\x001\t1\tl\x00"))
	f.Add([]byte("garbage"))
	f.Add([]byte(":000000 100644 0 1 A\x00a\x00-5\t0\ta\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := parseSummary(b)
		if err != nil {
			if !strings.Contains(err.Error(), "git diff-tree") {
				t.Fatalf("error %q does not name git diff-tree", err)
			}
			return
		}
		for _, fc := range files {
			switch fc.Kind {
			case KindAdded, KindModified, KindDeleted, KindTypeChanged:
			default:
				t.Fatalf("file %+v has kind %q", fc, fc.Kind)
			}
			if fc.Additions < 0 || fc.Deletions < 0 {
				t.Fatalf("negative counts: %+v", fc)
			}
		}
		_, _, _ = parseDiffTree(b)
	})
}
