package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// Plugins that fail: every call to a plugin has a deadline on the host's
// clock, and a plugin that lets one pass is killed; a plugin that dies
// (crashed, or killed so) ends its sessions with why, and with the end of
// its stderr, where a crashing plugin says what happened.

// DefaultPluginCallTimeout is Config.PluginCallTimeout's default.
const DefaultPluginCallTimeout = time.Minute

// errCallTimeout is the cause of a plugin call's context whose deadline
// passed.
var errCallTimeout = errors.New("the plugin call timed out")

// errPluginKilled says the host killed the plugin: it did not answer a
// call in time.
var errPluginKilled = errors.New("plugin killed")

// killedError is a call's error when the plugin did not answer it in time
// and was killed: of kinds errPluginKilled and sdk.ErrPluginUnavailable.
type killedError struct{ reason string }

func (e *killedError) Error() string { return e.reason }

func (e *killedError) Is(target error) bool {
	return target == errPluginKilled || target == sdk.ErrPluginUnavailable
}

// callPlugin calls the plugin (f, with a context that ends at the call's
// deadline on the host's clock, or when ctx does) and returns its error. A
// call that is not answered by its deadline kills the plugin process,
// whatever else it was doing: a plugin that hangs on one call cannot be
// trusted with the next. The error then says which call and how long the
// host waited, and is a killedError.
func (h *Host) callPlugin(ctx context.Context, p *pluginhost.Plugin, call string, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := clock.WithTimeout(ctx, h.cfg.Clock, timeout, errCallTimeout)
	defer cancel()
	err := f(ctx)
	if err == nil || !errors.Is(context.Cause(ctx), errCallTimeout) {
		return err
	}
	h.log.Error("plugin did not answer; killing it", "plugin", p.Name, "call", call, "timeout", timeout, "pid", p.Pid())
	return killPlugin(p, call, timeout)
}

// killPlugin kills a plugin that did not answer call within timeout, and
// returns the error that says so.
func killPlugin(p *pluginhost.Plugin, call string, timeout time.Duration) error {
	reason := fmt.Sprintf("the %s plugin did not answer %s within %s, so the host killed it", p.Name, call, timeout)
	p.KillFor(reason)
	return &killedError{reason: reason}
}

// pluginGoneFailure says why a plugin went away (err is what the host saw:
// a broken stream, a failed call): the host killed it (KilledFor), or
// err; once the process has exited, with the end of its stderr.
func pluginGoneFailure(p *pluginhost.Plugin, err error) string {
	msg := p.KilledFor()
	if msg == "" {
		msg = fmt.Sprintf("the %s plugin went away: %v", p.Name, err)
	}
	select {
	case <-p.Exited():
	default:
		return msg // the process lives: its stderr says nothing of this
	}
	if tail := p.StderrTail(); tail != "" {
		msg += "; the end of its stderr:\n" + tail
	}
	return msg
}

// pluginGoneError is err, said as pluginGoneFailure says it.
func pluginGoneError(p *pluginhost.Plugin, err error) error {
	return &goneError{msg: pluginGoneFailure(p, err), err: err}
}

type goneError struct {
	msg string
	err error
}

func (e *goneError) Error() string { return e.msg }
func (e *goneError) Unwrap() error { return e.err }
