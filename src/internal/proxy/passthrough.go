package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/methodkind"
	"github.com/collapser/collapser/src/internal/policy"
)

// streamDesc lets one client stream carry every call kind: the caller's own
// message pattern decides how many frames flow each way.
var streamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// passthrough forwards a call to the backend unchanged, frame by frame in both
// directions at once. The backend stream's context derives from the caller's,
// so the caller's cancellation and deadline reach the backend. A method known
// to take one request message is held to it, as grpc-go holds it.
func (p *Proxy) passthrough(ss grpc.ServerStream, method string, rule policy.Rule, o *origin) error {
	md := incoming(ss.Context(), o)
	opts := p.callOptions(contentSubtype(md), authority(md))
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), forwardable(md)))
	defer cancel()

	oneRequest := rule.Kind == methodkind.Unary || rule.Kind == methodkind.ServerStreaming
	start := time.Now()
	ts := &tagStream{ServerStream: ss, p: p}
	err := p.forward(ctx, cancel, ts, method, opts, oneRequest, p.statusFor(o, statusBypass))
	if err == nil && rule.Invalidates != nil {
		p.invalidateAfter(ss.Context(), method, rule.Invalidates, ts.tags)
	}
	code := callerCode(ss.Context(), err)
	if rule.Kind.Streams() {
		p.observer.ObserveBackendStream(method, code)
	} else {
		p.observer.ObserveBackendCall(ctx, method, code, time.Since(start))
	}
	p.report(ss.Context(), o.calls, method, OutcomePassthrough, code, producer{})
	return err
}

// forward runs the caller→backend direction on its own goroutine and the
// backend→caller direction on this one, and returns the status for the
// caller: the backend's, or an error naming the direction that failed. A
// method of one request message needs no second goroutine: forwardOne.
//
// When forward returns, the caller cancels ctx, which stops the backend
// stream and so any send of the caller→backend goroutine. That goroutine can
// only still be blocked in ss.RecvMsg when the backend finished first; gRPC
// ends the caller's stream as soon as the handler returns, which ends that
// receive at once.
func (p *Proxy) forward(ctx context.Context, cancel context.CancelFunc, ss grpc.ServerStream, method string, opts []grpc.CallOption, oneRequest bool, entry string) error {
	if oneRequest {
		return p.forwardOne(ctx, ss, method, opts, entry)
	}
	cs, err := p.backend.NewStream(ctx, streamDesc, method, opts...)
	if err != nil {
		return fmt.Errorf("proxy: open backend stream: %w", err)
	}
	up := make(chan error, 1)
	go func() {
		err := callerToBackend(ss, cs)
		// Report before cancelling, so that when the cancellation ends the
		// backend→caller direction, the cause is already in up.
		up <- err
		if err != nil {
			cancel()
		}
	}()

	down := backendToCaller(cs, ss, entry)
	select {
	case err := <-up:
		if err != nil {
			return err
		}
	default:
	}
	return down
}

// forwardOne forwards a call of one request message (unary or server
// streaming): it receives the request and the caller's half-close first, as
// grpc-go's own handler would, so a caller that breaks the method's
// cardinality never reaches the backend, then opens the backend stream.
func (p *Proxy) forwardOne(ctx context.Context, ss grpc.ServerStream, method string, opts []grpc.CallOption, entry string) error {
	var f passFrame
	if err := receiveOne(ss, &f); err != nil {
		f.free()
		return err
	}
	cs, err := p.backend.NewStream(ctx, streamDesc, method, opts...)
	if err != nil {
		f.free()
		return fmt.Errorf("proxy: open backend stream: %w", err)
	}
	if err := cs.SendMsg(&f); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("proxy caller→backend: send to backend: %w", err)
	}
	// CloseSend never fails in grpc-go; a stream that already ended reports
	// its status to RecvMsg, which backendToCaller reads.
	_ = cs.CloseSend()
	return backendToCaller(cs, ss, entry)
}

// callerToBackend copies frames from the caller to the backend until the
// caller half-closes (forwarded as CloseSend) or the backend ends the stream
// (its status is then read by the other direction).
func callerToBackend(ss grpc.ServerStream, cs grpc.ClientStream) error {
	for {
		var f passFrame
		if err := ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				// CloseSend never fails in grpc-go; a stream that already
				// ended reports its status to RecvMsg.
				_ = cs.CloseSend()
				return nil
			}
			return fmt.Errorf("proxy caller→backend: receive from caller: %w", err)
		}
		if err := cs.SendMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("proxy caller→backend: send to backend: %w", err)
		}
	}
}

// backendToCaller forwards the backend's headers as soon as they arrive, then
// every frame, then its trailers, and returns the backend's status (nil for
// OK) or an error saying what failed towards the caller.
func backendToCaller(cs grpc.ClientStream, ss grpc.ServerStream, entry string) error {
	// Header blocks until the backend sends headers or ends the stream; it
	// returns nil metadata for a trailers-only response, which stays one
	// (the cache-status entry then goes in its trailer).
	header, err := cs.Header()
	if err != nil {
		return fmt.Errorf("proxy backend→caller: receive header from backend: %w", err)
	}
	if err := sendStatusHeader(ss, strip(header), entry, header != nil); err != nil {
		return fmt.Errorf("proxy backend→caller: send header to caller: %w", refusedWrite(ss.Context(), err))
	}
	for {
		var f passFrame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(strip(cs.Trailer()))
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return fmt.Errorf("proxy backend→caller: send to caller: %w", refusedWrite(ss.Context(), err))
		}
	}
}
