package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/collapse"
)

// unary serves a call to a unary method through the collapse group: callers
// with the same key share one backend call, and each gets exactly what that
// call produced.
func (p *Proxy) unary(ss grpc.ServerStream, method string) error {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	sub := contentSubtype(md)
	var req frame
	if err := ss.RecvMsg(&req); err != nil {
		err = fmt.Errorf("proxy: receive request from caller: %w", err)
		p.observer.ObserveRequest(method, OutcomeError, status.Code(err))
		return err
	}
	key := p.keyRule.Key(method, sub, req.payload, md)
	resp, outcome, err := p.group.Do(ctx, key, func() (*Response, error) {
		// Only a leader's call runs this: hits and joins skip the copy.
		return p.invoke(method, sub, req.payload, forwardable(md))
	})
	err = p.reply(ss, method, outcome, resp, err)
	p.observer.ObserveRequest(method, outcome.String(), status.Code(err))
	return err
}

// invoke makes the one backend call a group of callers shares. Its context is
// detached from every caller (any of them may leave) and bounded by the
// backend timeout. The error is the backend's status when it is not OK, so
// the group never caches it; the Response carries it too, with the metadata
// the backend sent alongside.
func (p *Proxy) invoke(method, sub string, payload []byte, md metadata.MD) (*Response, error) {
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), p.backendTimeout)
	defer cancel()
	var header, trailer metadata.MD
	var out frame
	opts := append(p.callOptions(sub), grpc.Header(&header), grpc.Trailer(&trailer))
	start := time.Now()
	err := p.backend.Invoke(ctx, method, &frame{payload: payload}, &out, opts...)
	p.observer.ObserveBackendCall(method, status.Code(err), time.Since(start))
	resp := &Response{Header: forwardable(header), Trailer: forwardable(trailer)}
	if err != nil {
		resp.Err = status.Convert(err).Err()
		return resp, resp.Err
	}
	resp.Payload = out.payload
	return resp, nil
}

// reply sends the caller what the shared call produced, or the status of
// why there is nothing to send: the caller's own context ended, or the call
// panicked (logged once, by its leader) or exited.
func (p *Proxy) reply(ss grpc.ServerStream, method string, outcome collapse.Outcome, resp *Response, err error) error {
	var pe *collapse.PanicError
	switch {
	case errors.As(err, &pe):
		if outcome == collapse.Lead {
			p.logger.Error("proxy: backend call panicked", "method", method, "panic", pe.Value, "stack", string(pe.Stack))
		}
		return status.Errorf(codes.Internal, "proxy: backend call for %s panicked: %v", method, pe.Value)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case resp == nil: // collapse.ErrGoexit
		return status.Convert(err).Err()
	}
	// The metadata maps are shared by every caller: SetHeader and SetTrailer
	// merge them into the stream's own copies and never modify them.
	if err := ss.SetHeader(resp.Header); err != nil {
		return fmt.Errorf("proxy: set header for caller: %w", err)
	}
	if resp.Err == nil {
		if err := ss.SendMsg(&frame{payload: resp.Payload}); err != nil {
			return fmt.Errorf("proxy: send response to caller: %w", err)
		}
	}
	ss.SetTrailer(resp.Trailer)
	return resp.Err
}
