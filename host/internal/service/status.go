package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

// codeTable maps the host's errors to gRPC codes, first match wins: an
// id in use is a conflict too, so it comes before the conflicts.
var codeTable = []struct {
	err  error
	code codes.Code
}{
	{orchestrator.ErrStoreFailed, codes.Unavailable}, // before ErrDamaged: a damaged store is one that failed
	{orchestrator.ErrClosed, codes.Unavailable},
	{pluginhost.ErrClosed, codes.Unavailable},
	{domain.ErrExists, codes.AlreadyExists},
	{domain.ErrInvalid, codes.InvalidArgument},
	{domain.ErrNotFound, codes.NotFound},
	{domain.ErrConflict, codes.FailedPrecondition},
	{domain.ErrUnsupported, codes.FailedPrecondition},
	{sdk.ErrNotResumable, codes.FailedPrecondition}, // Decide's, as a plugin's: an answer the provider can no longer take
	{pluginhost.ErrNotInstalled, codes.FailedPrecondition},
	{eventlog.ErrDamaged, codes.DataLoss},
	{eventlog.ErrReadOnly, codes.FailedPrecondition},
	{orchestrator.ErrOwnedElsewhere, codes.FailedPrecondition},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// codeOf is the gRPC code of a host error (Internal when it is none of
// the table's).
func codeOf(err error) codes.Code {
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	for _, c := range codeTable {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return codes.Internal
}

// toStatus turns a host error into the status an RPC returns, its message
// the error's. A status passes through. An internal error is logged: the
// client sees what failed, the log keeps it beside the RPC's name.
func (s *Server) toStatus(rpc string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if msg, ok := storeFailed(err); ok {
		return status.Error(codes.Unavailable, msg)
	}
	code := codeOf(err)
	if code == codes.Internal {
		s.log.Error("rpc failed", "rpc", rpc, "error", err)
	}
	return status.Error(code, err.Error())
}

// invalid is an InvalidArgument naming the request's field (its proto
// name).
func invalid(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, field+": "+fmt.Sprintf(format, args...))
}

// required refuses an empty field.
func required(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	return checkID(field, v)
}

// checkID refuses an id the host would refuse (too long, or holding a
// NUL byte), naming the field.
func checkID(field, v string) error {
	if len(v) > 256 {
		return invalid(field, "longer than 256 bytes")
	}
	for i := range len(v) {
		if v[i] == 0 {
			return invalid(field, "holds a NUL byte")
		}
	}
	return nil
}
