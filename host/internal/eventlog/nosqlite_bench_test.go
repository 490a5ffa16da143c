//go:build !sqlitebench

package eventlog

import "testing"

// parallelSQLite is the SQLite baseline; without the sqlitebench tag (it
// needs cgo) it is skipped, saying so.
func parallelSQLite(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { b.Skip("the SQLite baseline needs -tags sqlitebench (make bench sets it)") })
}
