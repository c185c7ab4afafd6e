// Package callstatus says which gRPC status a caller gets for an error of
// the sidecar's call path: a backend status, a context's end, or one of the
// collapse engine's own errors. The proxy answers with it, metrics count it
// and the policy's staleIfErrorCodes match it, so all three agree.
package callstatus

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
)

// Of returns the status of err; nil is OK.
func Of(err error) *status.Status {
	var pe *collapse.PanicError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, collapse.ErrOverloaded):
		return status.New(codes.ResourceExhausted, "collapser: "+err.Error())
	case errors.As(err, &pe):
		return status.Newf(codes.Internal, "collapser: backend call panicked: %v", pe.Value)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err)
	}
	return status.Convert(err)
}

// Code returns the code of Of(err).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return Of(err).Code()
}

// deadlineSlack is how close to its deadline a cancelled call may end and
// still count as having reached it: a client whose deadline passes cancels
// the stream (RST_STREAM, the same code as for a cancellation) about when
// the server's own copy of that deadline, taken from grpc-timeout when the
// headers arrived, passes too; whichever the server sees first is a race,
// and the client reports DEADLINE_EXCEEDED either way. The server's copy
// runs late by the headers' delay, which a loaded machine makes long: 50 ms
// was too short beside two CPU hogs on two cores (100 callers, all counted
// CANCELLED). The price of a wide slack is small: a caller that cancels in
// the last 250 ms before its deadline is counted DEADLINE_EXCEEDED.
const deadlineSlack = 250 * time.Millisecond

// Ended returns the code a caller whose ctx has ended got: DeadlineExceeded
// when its deadline passed or was about to (see deadlineSlack), else Canceled.
func Ended(ctx context.Context) codes.Code {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSlack {
		return codes.DeadlineExceeded
	}
	return codes.Canceled
}
