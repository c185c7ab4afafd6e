package collapser

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
)

// UnaryServerInterceptor returns the interceptor that serves a server's
// unary calls through the engine: calls of a method the policy collapses
// share one run of the handler per key, and are answered from what it kept
// while the answer is fresh (or stale, as the policy allows); every other
// call runs the handler as it is, and a write whose rule names what it
// invalidates purges it when it succeeds.
//
// Chain it after the interceptors that authenticate or authorize a call
// (grpc.ChainUnaryInterceptor(auth, c.UnaryServerInterceptor())): a call it
// answers from another's run goes no further. The handler runs with the
// context of the caller that led the run, save its deadline and
// cancellation, which are the run's (the rule's timeout; it ends when every
// caller waiting for it has left). The header and trailer it sets go to
// every caller the run answers.
//
// A method is collapsed only when its request and reply are protobuf
// messages the process has registered (generated code does), since every
// caller gets its own reply, decoded from the run's.
func (c *Collapser) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return c.serveUnary
}

func (c *Collapser) serveUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod
	if _, ok := info.Server.(adminv1.CacheServer); ok {
		return handler(ctx, req) // the engine's own purges (RegisterAdmin) are no calls of the application's
	}
	rule := c.proxy.Rule(method)
	in, ok := req.(proto.Message)
	var types *methodTypes
	if rule.Action == policy.Collapse && ok {
		types = c.types.of(method)
	}
	if types == nil {
		var out any
		err := c.proxy.PassServer(ctx, method, rule, func(ctx context.Context) (err error) {
			out, err = handler(ctx, req)
			return err
		})
		return out, err
	}
	payload, err := proto.Marshal(in)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "collapser: encode the request of %s: %v", method, err)
	}
	resp, sent, err := proxy.Serve(c.proxy, ctx, method, rule, payload,
		handlerConn{caller: ctx, request: in.ProtoReflect().Type(), handler: handler})
	if resp == nil {
		return nil, err
	}
	if len(sent.Header) > 0 {
		// grpc-go merges it into a copy of its own: the answer's stays as it is.
		if err := grpc.SetHeader(ctx, sent.Header); err != nil {
			return nil, err
		}
	}
	if len(sent.Trailer) > 0 {
		if err := grpc.SetTrailer(ctx, sent.Trailer); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	out := types.reply.New().Interface()
	if err := proto.Unmarshal(resp.Payload, out); err != nil {
		return nil, status.Errorf(codes.Internal, "collapser: decode the answer of %s: %v", method, err)
	}
	return out, nil
}

// handlerConn is the engine's backend for one call the server interceptor
// serves: the application's handler, in the process (a
// proxy.LocalBackend). Its call runs the handler on a request of its own,
// decoded from the engine's (the caller's may change after it returned,
// and a refresh runs after it did), in handlerContext of the engine's call
// and caller (the caller who led the run, or found its answer stale).
type handlerConn struct {
	caller  context.Context
	request protoreflect.MessageType
	handler grpc.UnaryHandler
}

// RunLocal implements proxy.LocalBackend.
func (h handlerConn) RunLocal(ctx context.Context, method string, request []byte) ([]byte, metadata.MD, metadata.MD, error) {
	req := h.request.New().Interface()
	if err := proto.Unmarshal(request, req); err != nil {
		return nil, nil, nil, status.Errorf(codes.Internal, "collapser: decode the request of %s: %v", method, err)
	}
	stream := &recorder{method: method}
	out, err := h.handler(grpc.NewContextWithServerTransportStream(handlerContext(ctx, h.caller), stream), req)
	return ran(method, stream, out, err)
}

// Invoke implements grpc.ClientConnInterface, as RunLocal.
func (h handlerConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	payload, _ := proxy.Wire(args)
	b, header, trailer, err := h.RunLocal(ctx, method, payload)
	return settle(reply, opts, b, header, trailer, err)
}

// ran returns what a handler's run of method produced: the wire bytes of
// out, its answer, or its error err, with the header and trailer it set
// on stream.
func ran(method string, stream *recorder, out any, err error) ([]byte, metadata.MD, metadata.MD, error) {
	header, trailer := stream.result()
	if err != nil {
		return nil, header, trailer, err
	}
	m, ok := out.(proto.Message)
	if !ok {
		return nil, header, trailer, status.Errorf(codes.Internal, "collapser: the handler of %s answered %T, not a protobuf message", method, out)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, header, trailer, status.Errorf(codes.Internal, "collapser: encode the answer of %s: %v", method, err)
	}
	return b, header, trailer, nil
}

// settle ends a call made through grpc.ClientConnInterface on a handler's
// run, with what the run produced (ran): the header and trailer go where
// opts ask, the answer's wire bytes b into reply.
func settle(reply any, opts []grpc.CallOption, b []byte, header, trailer metadata.MD, err error) error {
	fill(opts, header, trailer)
	if err != nil {
		return err
	}
	proxy.SetWire(reply, b)
	return nil
}

// NewStream implements grpc.ClientConnInterface: a unary handler has no
// stream.
func (h handlerConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Internal, "collapser: a unary handler has no stream")
}

// handlerContext is the context a shared run's handler runs in: the
// deadline and cancellation of engine, the engine's call, and the values
// of caller, who led the run (who called, from where, and what the
// interceptors before this one added), with no outgoing metadata, not
// even the metadata caller's calls would send: the run is shared, and the
// handler's own calls send only what it adds.
func handlerContext(engine, caller context.Context) context.Context {
	return valuesOf{Context: metadata.NewOutgoingContext(engine, nil), values: caller}
}

// valuesOf is a context with the deadline and cancellation of its own
// Context and the values of values, where its own has none: a run's
// handler sees the values its leader's interceptors put in its context
// (who called, from where), and the span of the run.
type valuesOf struct {
	context.Context
	values context.Context
}

// Value implements context.Context.
func (v valuesOf) Value(key any) any {
	if x := v.Context.Value(key); x != nil {
		return x
	}
	return v.values.Value(key)
}

// recorder is the stream of a run's handler: it keeps the header and
// trailer the handler sets, for every caller the run answers.
type recorder struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
}

// Method implements grpc.ServerTransportStream.
func (r *recorder) Method() string { return r.method }

// SetHeader implements grpc.ServerTransportStream.
func (r *recorder) SetHeader(md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.header = metadata.Join(r.header, md)
	return nil
}

// SendHeader implements grpc.ServerTransportStream: the header goes to
// the callers with the answer.
func (r *recorder) SendHeader(md metadata.MD) error {
	return r.SetHeader(md)
}

// SetTrailer implements grpc.ServerTransportStream.
func (r *recorder) SetTrailer(md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trailer = metadata.Join(r.trailer, md)
	return nil
}

// result returns the header and trailer set, the recorder's own copies.
func (r *recorder) result() (header, trailer metadata.MD) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header, r.trailer
}

// messageTypes remembers the request and reply message types of each
// method, from the process's registered descriptors. A server's methods
// and a client's are the application's own: the set is bounded.
type messageTypes struct {
	types sync.Map // full method name → *methodTypes; nil for none
}

// methodTypes are a method's request and reply message types.
type methodTypes struct {
	request, reply protoreflect.MessageType
}

// of returns the message types of method ("/pkg.Service/Method"); nil
// when the process has not registered them.
func (r *messageTypes) of(method string) *methodTypes {
	if t, ok := r.types.Load(method); ok {
		return t.(*methodTypes)
	}
	t, err := lookupTypes(method)
	if err != nil {
		t = nil
	}
	r.types.Store(method, t)
	return t
}

// lookupTypes finds the message types of method in the process's
// registries.
func lookupTypes(method string) (*methodTypes, error) {
	service, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("collapser: %q is no full method name", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("collapser: %s is no service", service)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("collapser: %s has no method %s", service, name)
	}
	request, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, err
	}
	reply, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, err
	}
	return &methodTypes{request: request, reply: reply}, nil
}
