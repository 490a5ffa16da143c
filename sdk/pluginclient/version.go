package pluginclient

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/baton-run/baton/sdk"
)

// ErrVersion is the kind of a VersionError.
var ErrVersion = errors.New("plugin protocol version mismatch")

// VersionError is a plugin built for another plugin protocol version than
// the host's.
type VersionError struct {
	Path   string
	Plugin int // the version the plugin speaks
	Host   int // the version the host speaks
}

func (e *VersionError) Error() string {
	what := "rebuild the plugin with sdk v1 (github.com/baton-run/baton/sdk), or install a release of it built for protocol " + strconv.Itoa(e.Host)
	if e.Plugin > e.Host {
		what = "upgrade baton to a release that speaks protocol " + strconv.Itoa(e.Plugin) + ", or install a release of the plugin built for protocol " + strconv.Itoa(e.Host)
	}
	return fmt.Sprintf("the plugin speaks plugin protocol version %d, this host speaks version %d: %s", e.Plugin, e.Host, what)
}

func (e *VersionError) Unwrap() error { return ErrVersion }

// incompatible is go-plugin's error for a plugin that negotiated no version
// the host has: "incompatible API version with plugin. Plugin version: 2,
// Client versions: [1]".
var incompatible = regexp.MustCompile(`(?i)incompatible API version with plugin\. Plugin version: (\d+)`)

// otherVersion reads the plugin's version from go-plugin's error for a
// version mismatch.
func otherVersion(err error) (int, bool) {
	m := incompatible.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	v, err := strconv.Atoi(m[1])
	return v, err == nil && v != sdk.ProtocolVersion
}
