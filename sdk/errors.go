package sdk

import (
	"errors"
	"fmt"
)

// Errors that cross the plugin boundary keep their identity: a plugin
// returns them (wrapped as it likes) and the host can test for them with
// errors.Is.
var (
	// ErrUnknownSession: the session was never opened or is closed.
	ErrUnknownSession = errors.New("unknown session")
	// ErrUnknownRequest: no open request has that ref.
	ErrUnknownRequest = errors.New("unknown request")
	// ErrNotResumable: the provider can no longer receive the answer.
	ErrNotResumable = errors.New("not resumable")
	// ErrUnsupported: the plugin lacks the capability.
	ErrUnsupported = errors.New("unsupported")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrBusy: the session cannot take this now (e.g. a turn is running).
	ErrBusy = errors.New("session busy")
	// ErrProviderExited: the provider process is gone.
	ErrProviderExited = errors.New("provider exited")
	// ErrPluginUnavailable: the plugin process is gone or unreachable.
	ErrPluginUnavailable = errors.New("plugin unavailable")
)

// Errorf wraps one of the sdk errors with a message.
func Errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), kind)
}

// Kindf is Errorf for a message that already says what the kind says ("the
// agent exited …" needs no ": provider exited" after it): the error is of
// kind for errors.Is, and its text is the message alone.
func Kindf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
