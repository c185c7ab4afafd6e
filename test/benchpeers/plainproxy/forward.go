package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// bothStreams lets one backend stream carry every call kind.
var bothStreams = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// forwarder returns the handler of every call: it opens the same method on
// backend with the caller's metadata and copies frames both ways at once,
// then hands back the backend's header, trailer and status.
func forwarder(backend *grpc.ClientConn) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		method, ok := grpc.MethodFromServerStream(ss)
		if !ok {
			return status.Error(codes.Internal, "plainproxy: no method on the server stream")
		}
		md, _ := metadata.FromIncomingContext(ss.Context())
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), withoutPseudoHeaders(md)))
		defer cancel()
		cs, err := backend.NewStream(ctx, bothStreams, method, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return err
		}
		up := make(chan error, 1)
		go func() { up <- callerToBackend(ss, cs) }()
		down := backendToCaller(cs, ss)
		// The backend's answer ends the call; an earlier failure to read the
		// caller is the better error to report.
		select {
		case err := <-up:
			if err != nil {
				return err
			}
		default:
		}
		return down
	}
}

// callerToBackend copies the caller's frames to the backend until the caller
// half-closes, which it passes on with CloseSend.
func callerToBackend(ss grpc.ServerStream, cs grpc.ClientStream) error {
	for {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return cs.CloseSend()
			}
			return fmt.Errorf("plainproxy: receive from caller: %w", err)
		}
		if err := cs.SendMsg(&f); err != nil {
			// io.EOF: the backend ended the call; its status is read by
			// backendToCaller.
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("plainproxy: send to backend: %w", err)
		}
	}
}

// backendToCaller copies the backend's header, frames and trailer to the
// caller and returns the backend's status (nil for OK).
func backendToCaller(cs grpc.ClientStream, ss grpc.ServerStream) error {
	header, err := cs.Header()
	if err != nil {
		return err
	}
	if header != nil {
		if err := ss.SendHeader(header); err != nil {
			return fmt.Errorf("plainproxy: send header to caller: %w", err)
		}
	}
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return fmt.Errorf("plainproxy: send to caller: %w", err)
		}
	}
}

// withoutPseudoHeaders returns md without HTTP/2 pseudo headers such as
// :authority, which belong to one hop; grpc-go writes the backend hop's own.
func withoutPseudoHeaders(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if !strings.HasPrefix(k, ":") {
			out[k] = v
		}
	}
	return out
}
