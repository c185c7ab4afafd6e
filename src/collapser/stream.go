package collapser

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
)

// StreamServerInterceptor returns the interceptor that serves a server's
// streaming calls through the engine: calls of a server-streaming method
// the policy replays (stream: replay) share one run of the handler per
// key, each caller reading its stream from the first message to the end,
// replayed from its record while the record is kept; every other call
// runs the handler as it is, and a write whose rule names what it
// invalidates purges it when it succeeds.
//
// Chain it after the interceptors that authenticate or authorize a call,
// as UnaryServerInterceptor. A shared run's handler has the context of the
// caller that started it, save its deadline and cancellation, which are
// the record's: it ends when no caller reads the stream and none may join
// it any more. Only methods whose messages the process has registered are
// replayed.
func (c *Collapser) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return c.serveStream
}

func (c *Collapser) serveStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	method := info.FullMethod
	rule := c.proxy.Rule(method)
	var types *methodTypes
	if rule.Action == policy.Replay && info.IsServerStream && !info.IsClientStream {
		types = c.types.of(method)
	}
	if types == nil {
		return c.proxy.PassStream(ss, method, rule, func(ss grpc.ServerStream) error { return handler(srv, ss) })
	}
	return c.proxy.Replay(&typedStream{ServerStream: ss, types: types}, method, rule,
		&streamConn{caller: ss.Context(), srv: srv, handler: handler})
}

// typedStream is a caller's stream as the engine reads and writes it: the
// request and the messages as their wire bytes (proxy.Wire), decoded from
// and encoded to the method's message types on the caller's stream.
type typedStream struct {
	grpc.ServerStream
	types *methodTypes
}

// RecvMsg implements grpc.ServerStream.
func (t *typedStream) RecvMsg(m any) error {
	req := t.types.request.New().Interface()
	if err := t.ServerStream.RecvMsg(req); err != nil {
		return err
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "collapser: encode the request: %v", err)
	}
	proxy.SetWire(m, b)
	return nil
}

// SendMsg implements grpc.ServerStream.
func (t *typedStream) SendMsg(m any) error {
	b, _ := proxy.Wire(m)
	msg := t.types.reply.New().Interface()
	if err := proto.Unmarshal(b, msg); err != nil {
		return status.Errorf(codes.Internal, "collapser: decode a message of the stream: %v", err)
	}
	return t.ServerStream.SendMsg(msg)
}

// streamConn is the engine's backend for one server-streaming call the
// stream interceptor serves, or a peer forwarded: a connection to the
// application's handler, in the process. A stream it opens runs the
// handler on its own goroutine, with a stream of its own (handlerStream),
// in handlerContext of the engine's stream and caller, or forwardedContext
// of the engine's stream.
type streamConn struct {
	caller  context.Context // nil: a stream a peer forwarded
	srv     any
	handler grpc.StreamHandler
}

// Invoke implements grpc.ClientConnInterface: a stream handler has no
// unary call.
func (s *streamConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return status.Error(codes.Internal, "collapser: a stream handler has no unary call")
}

// NewStream implements grpc.ClientConnInterface.
func (s *streamConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	var run context.Context
	if s.caller != nil {
		run = handlerContext(ctx, s.caller)
	} else {
		run = forwardedContext(ctx)
	}
	h := &handlerStream{
		ctx:     run,
		engine:  ctx,
		cancel:  cancel,
		method:  method,
		request: make(chan []byte, 1),
		msgs:    make(chan []byte),
		started: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go func() {
		err := s.handler(s.srv, h)
		h.end(err)
	}()
	return (*engineStream)(h), nil
}

// handlerStream is one run of a stream handler for the engine: the
// handler's grpc.ServerStream. The engine reads it as a grpc.ClientStream
// (engineStream). A message the handler sends waits until the engine
// takes it, or its stream ends.
type handlerStream struct {
	ctx     context.Context // the handler's
	engine  context.Context // the engine's stream's
	cancel  context.CancelFunc
	method  string
	request chan []byte   // the engine's request, once
	msgs    chan []byte   // the handler's messages, encoded
	started chan struct{} // closed once the header is sent (or the run ended)
	done    chan struct{} // closed once the run ended

	mu              sync.Mutex
	received        bool // the handler took the request
	header, trailer metadata.MD
	sent            bool  // the header was sent
	err             error // the run's status, once done
}

// Context implements grpc.ServerStream.
func (h *handlerStream) Context() context.Context { return h.ctx }

// SetHeader implements grpc.ServerStream.
func (h *handlerStream) SetHeader(md metadata.MD) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sent {
		return status.Error(codes.Internal, "collapser: the header was sent already")
	}
	h.header = metadata.Join(h.header, md)
	return nil
}

// SendHeader implements grpc.ServerStream.
func (h *handlerStream) SendHeader(md metadata.MD) error {
	if err := h.SetHeader(md); err != nil {
		return err
	}
	h.start()
	return nil
}

// start sends the header, once.
func (h *handlerStream) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sent {
		h.sent = true
		if h.header == nil {
			h.header = metadata.MD{}
		}
		close(h.started)
	}
}

// SetTrailer implements grpc.ServerStream.
func (h *handlerStream) SetTrailer(md metadata.MD) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trailer = metadata.Join(h.trailer, md)
}

// SendMsg implements grpc.ServerStream.
func (h *handlerStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "collapser: the handler of %s sent %T, not a protobuf message", h.method, m)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return status.Errorf(codes.Internal, "collapser: encode a message of %s: %v", h.method, err)
	}
	h.start()
	select {
	case h.msgs <- b:
		return nil
	case <-h.engine.Done():
		return status.FromContextError(h.engine.Err()).Err()
	}
}

// RecvMsg implements grpc.ServerStream: the request, then io.EOF.
func (h *handlerStream) RecvMsg(m any) error {
	h.mu.Lock()
	received := h.received
	h.received = true
	h.mu.Unlock()
	if received {
		return io.EOF
	}
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "collapser: the handler of %s reads into %T, not a protobuf message", h.method, m)
	}
	select {
	case b := <-h.request:
		if err := proto.Unmarshal(b, msg); err != nil {
			return status.Errorf(codes.Internal, "collapser: decode the request of %s: %v", h.method, err)
		}
		return nil
	case <-h.engine.Done():
		return status.FromContextError(h.engine.Err()).Err()
	}
}

// end ends the run with the handler's status.
func (h *handlerStream) end(err error) {
	h.mu.Lock()
	if err != nil {
		err = status.Convert(err).Err()
	}
	h.err = err
	if !h.sent { // a stream with no header (nil): its trailer alone
		h.sent = true
		close(h.started)
	}
	h.mu.Unlock()
	close(h.done)
	h.cancel()
}

// engineStream is a handlerStream as the engine reads it.
type engineStream handlerStream

// Context implements grpc.ClientStream.
func (e *engineStream) Context() context.Context { return e.engine }

// SendMsg implements grpc.ClientStream: the request.
func (e *engineStream) SendMsg(m any) error {
	b, _ := proxy.Wire(m)
	select {
	case e.request <- b:
		return nil
	default:
		return status.Error(codes.Internal, "collapser: a server-streaming call takes one request")
	}
}

// CloseSend implements grpc.ClientStream.
func (e *engineStream) CloseSend() error { return nil }

// Header implements grpc.ClientStream: it waits for the header, and is
// nil for a stream that ended without one.
func (e *engineStream) Header() (metadata.MD, error) {
	select {
	case <-e.started:
	case <-e.engine.Done():
		return nil, status.FromContextError(e.engine.Err()).Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.header, nil
}

// Trailer implements grpc.ClientStream; it is complete once RecvMsg has
// returned an error.
func (e *engineStream) Trailer() metadata.MD {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.trailer
}

// RecvMsg implements grpc.ClientStream: the handler's next message, or
// io.EOF once it returned nil, or its status.
func (e *engineStream) RecvMsg(m any) error {
	select {
	case b := <-e.msgs:
		proxy.SetWire(m, b)
		return nil
	case <-e.done:
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.err == nil {
			return io.EOF
		}
		return e.err
	}
}
