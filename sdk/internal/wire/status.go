package wire

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/sdk"
)

type mapping struct {
	err    error
	code   codes.Code
	reason string
}

// statusTable is the one place where sdk errors meet gRPC codes. Each error
// keeps its identity across the boundary through a reason prefix.
var statusTable = []mapping{
	{sdk.ErrUnknownSession, codes.NotFound, "unknown_session"},
	{sdk.ErrUnknownRequest, codes.NotFound, "unknown_request"},
	{sdk.ErrNotResumable, codes.FailedPrecondition, "not_resumable"},
	{sdk.ErrUnsupported, codes.Unimplemented, "unsupported"},
	{sdk.ErrInvalid, codes.InvalidArgument, "invalid"},
	{sdk.ErrBusy, codes.FailedPrecondition, "busy"},
	{sdk.ErrProviderExited, codes.Unavailable, "provider_exited"},
	{sdk.ErrPluginUnavailable, codes.Unavailable, "plugin_unavailable"},
}

const reasonSep = ": "

// ToStatus turns an adapter's error into a gRPC status error.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range statusTable {
		if errors.Is(err, m.err) {
			return status.Error(m.code, m.reason+reasonSep+err.Error())
		}
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// FromStatus turns a gRPC status error back into an error that wraps the
// matching sdk error, so callers can use errors.Is.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	for _, m := range statusTable {
		prefix := m.reason + reasonSep
		if st.Code() == m.code && len(msg) >= len(prefix) && msg[:len(prefix)] == prefix {
			return &remoteError{msg: msg[len(prefix):], kind: m.err}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return &remoteError{msg: msg, kind: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{msg: msg, kind: context.DeadlineExceeded}
	case codes.Unavailable:
		return &remoteError{msg: "plugin unavailable: " + msg, kind: sdk.ErrPluginUnavailable}
	}
	return errors.New(msg)
}

type remoteError struct {
	msg  string
	kind error
}

func (r *remoteError) Error() string { return r.msg }
func (r *remoteError) Unwrap() error { return r.kind }
