package eventlog

import "github.com/cockroachdb/pebble/v2"

// Meta returns a metadata value.
func (s *Store) Meta(name string) (v []byte, found bool, err error) {
	err = s.read(func() error {
		v, found, err = s.get(metaKey(name))
		return err
	})
	return v, found, err
}

// SetMeta writes a metadata value, synced.
func (s *Store) SetMeta(name string, v []byte) error {
	return s.read(func() error { return s.db.Set(metaKey(name), v, pebble.Sync) })
}
