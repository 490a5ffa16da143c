//go:build sqlitebench

package eventlog

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// parallelSQLite is the SQLite baseline (make bench builds it; it needs
// cgo): a WAL-mode database with synchronous=FULL, eight goroutines each
// inserting an event and a receipt in one transaction.
func parallelSQLite(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		db, err := sql.Open("sqlite3", "file:"+filepath.Join(b.TempDir(), "log.db")+
			"?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{
			`CREATE TABLE events (seq INTEGER PRIMARY KEY, thread TEXT NOT NULL, data BLOB NOT NULL)`,
			`CREATE INDEX events_thread ON events (thread, seq)`,
			`CREATE TABLE receipts (command TEXT PRIMARY KEY, receipt BLOB NOT NULL)`,
		} {
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		var seq atomic.Uint64
		parallel(b, func(w, i int) error {
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			defer tx.Rollback()
			res, err := tx.Exec(`INSERT INTO events (thread, data) VALUES (?, ?)`, fmt.Sprintf("thread-%d", w), []byte(benchEvent))
			if err != nil {
				return err
			}
			n, _ := res.LastInsertId()
			seq.Store(uint64(n))
			cmd := fmt.Sprintf("cmd-%d", i)
			if _, err := tx.Exec(`INSERT INTO receipts (command, receipt) VALUES (?, ?)`, cmd, receiptOf(cmd, uint64(n))); err != nil {
				return err
			}
			return tx.Commit()
		})
	})
}
