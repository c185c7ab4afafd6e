package collapser

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"weak"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

// UnaryClientInterceptor returns the interceptor that collapses a
// process's identical outgoing unary calls (a gateway fanning out to a
// backend): calls of a method the policy collapses, on one connection,
// with the same request message and outgoing metadata (credentials
// always), share one call, and its answer is kept and served stale as the
// policy says. Every caller gets its own reply message, decoded from the
// one call's, and the header and trailer it asked for (grpc.Header,
// grpc.Trailer) are that call's. Calls on two connections never share:
// each may carry credentials of its own.
//
// A call is collapsed only when its request and reply are protobuf
// messages and its call options are ones whose meaning is the same for
// every caller (grpc.Header, grpc.Trailer, grpc.WaitForReady, the message
// size limits, compression, and the mark generated code adds); any other option (per-call credentials, a
// codec, an authority, ...) makes it a call of its own, passed as it is.
// The shared call is made with the options of the caller that leads it.
func (c *Collapser) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return c.invokeUnary
}

func (c *Collapser) invokeUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rule := c.proxy.Rule(method)
	in, inOK := req.(proto.Message)
	out, outOK := reply.(proto.Message)
	if rule.Action != policy.Collapse || !inOK || !outOK || !shareable(opts) {
		header, trailer, err := c.proxy.Pass(ctx, method, rule, func() (header, trailer metadata.MD, err error) {
			err = invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header), grpc.Trailer(&trailer))...)
			return header, trailer, err
		})
		fill(opts, header, trailer)
		return err
	}
	payload, err := proto.Marshal(in)
	if err != nil {
		return status.Errorf(codes.Internal, "collapser: encode the request of %s: %v", method, err)
	}
	keyed, _ := metadata.FromOutgoingContext(ctx) // the call's own copy
	if keyed == nil {
		keyed = metadata.MD{}
	}
	keyed[requestkey.Connection] = []string{c.conns.of(cc)}
	resp, sent, err := proxy.Call(c.proxy, ctx, method, rule, payload, keyed,
		invokerConn{cc: cc, invoker: invoker, request: in, reply: out, opts: opts})
	if resp == nil {
		return err
	}
	fill(opts, sent.Header, sent.Trailer)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(resp.Payload, out); err != nil {
		return status.Errorf(codes.Internal, "collapser: decode the answer of %s: %v", method, err)
	}
	return nil
}

// invokerConn is the engine's backend for one call the client interceptor
// collapses: its call is the invoker's, on cc, with the options of the
// caller that leads it (but its header and trailer, which every caller
// gets from the answer), on a request and into a reply of their own, of
// the types of request and reply, decoded from and encoded to the
// engine's messages. The engine's call carries the caller's outgoing
// metadata already.
type invokerConn struct {
	cc             *grpc.ClientConn
	invoker        grpc.UnaryInvoker
	request, reply proto.Message
	opts           []grpc.CallOption
}

// Invoke implements grpc.ClientConnInterface.
func (i invokerConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	payload, _ := proxy.Wire(args)
	req := i.request.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(payload, req); err != nil {
		return status.Errorf(codes.Internal, "collapser: decode the request of %s: %v", method, err)
	}
	out := i.reply.ProtoReflect().New().Interface()
	var header, trailer metadata.MD
	own := make([]grpc.CallOption, 0, len(i.opts)+2)
	for _, o := range i.opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption:
		default:
			own = append(own, o)
		}
	}
	own = append(own, grpc.Header(&header), grpc.Trailer(&trailer))
	err := i.invoker(ctx, method, req, out, i.cc, own...)
	fill(opts, header, trailer)
	if err != nil {
		return err
	}
	b, err := proto.Marshal(out)
	if err != nil {
		return status.Errorf(codes.Internal, "collapser: encode the answer of %s: %v", method, err)
	}
	proxy.SetWire(reply, b)
	return nil
}

// NewStream implements grpc.ClientConnInterface: the client interceptor
// collapses unary calls only.
func (i invokerConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Internal, "collapser: the client interceptor collapses unary calls only")
}

// shareable reports whether a call with opts may share another's: every
// option means the same whoever makes the call.
func shareable(opts []grpc.CallOption) bool {
	for _, o := range opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.FailFastCallOption,
			grpc.MaxRecvMsgSizeCallOption, grpc.MaxSendMsgSizeCallOption, grpc.CompressorCallOption,
			grpc.StaticMethodCallOption, grpc.EmptyCallOption:
		default:
			return false
		}
	}
	return true
}

// fill gives a caller the header and trailer of the answer it got, where
// its options asked for them: copies of its own.
func fill(opts []grpc.CallOption, header, trailer metadata.MD) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = trailer.Copy()
		}
	}
}

// connIDs names each connection calls are made on, for the keys. A
// connection is held weakly: once it is collected, its name goes too, and
// no later connection gets it.
type connIDs struct {
	next atomic.Uint64
	ids  sync.Map // weak.Pointer[grpc.ClientConn] → string
}

// of returns cc's name, the same for every call made on it.
func (c *connIDs) of(cc *grpc.ClientConn) string {
	key := weak.Make(cc)
	if id, ok := c.ids.Load(key); ok {
		return id.(string)
	}
	id, loaded := c.ids.LoadOrStore(key, strconv.FormatUint(c.next.Add(1), 10))
	if !loaded {
		runtime.AddCleanup(cc, func(k weak.Pointer[grpc.ClientConn]) { c.ids.Delete(k) }, key)
	}
	return id.(string)
}
