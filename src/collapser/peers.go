package collapser

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/fleet"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/tracing"
)

// Peers makes a Collapser one replica of a release among others: every
// key's shared call is made by its owner, picked on one ring by every
// replica, and purges reach every replica. The others may be sidecars or
// services that run the library: they join one ring, so a release moving
// from one to the other pod by pod keeps one call per key. Each field is
// the sidecar's setting of the flag it names (the sidecar's README), and
// must agree with the other replicas'.
type Peers struct {
	// Target names every replica, this one included: dns:///name:port of
	// a headless Service, or ip:port,ip:port (--peers); "": no peers.
	Target string
	// Replicas names every replica, ready or not, which purges are taken
	// to and synced with (--replicas); "": Target.
	Replicas string
	// Listen is the address of this replica's peer listener (ServePeers),
	// by which it knows itself among the replicas (--peer-listen).
	Listen string
	// TokenFile names the file of the release's peer token, which every
	// call between replicas carries (--peer-token-file); required.
	TokenFile string
	// CertFile, KeyFile and CAFile are this replica's certificate and key
	// and the CA of the release, for mutual TLS between replicas
	// (--peer-tls-cert-file, --peer-tls-key-file, --peer-tls-ca-file),
	// read again when they change.
	CertFile, KeyFile, CAFile string
	// Plaintext lets replicas call each other in plain text, without the
	// TLS files (--peer-plaintext).
	Plaintext bool
	// UnaryInterceptor and StreamInterceptor run around the handler of
	// every call a peer forwards here, as the application's server runs
	// the interceptors chained before the Collapser's around its callers'
	// calls (to authorize the caller whose headers the call carries, or
	// put what it needs in the context); nil: none.
	UnaryInterceptor  grpc.UnaryServerInterceptor
	StreamInterceptor grpc.StreamServerInterceptor
}

// settings returns p as the sidecar's settings name it.
func (p Peers) settings() config.Settings {
	return config.Settings{
		Peers:           p.Target,
		Replicas:        p.Replicas,
		PeerListen:      p.Listen,
		PeerTokenFile:   p.TokenFile,
		PeerTLSCertFile: p.CertFile,
		PeerTLSKeyFile:  p.KeyFile,
		PeerTLSCAFile:   p.CAFile,
		PeerPlaintext:   p.Plaintext,
	}
}

// Registrar returns srv, which also tells the Collapser of every service
// registered on it: a call a peer forwards here, because this replica owns
// its key, runs the handler of the service registered for its method
// (Peers). Register the application's services through it:
//
//	pb.RegisterGreeterServer(c.Registrar(srv), impl)
func (c *Collapser) Registrar(srv grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return registrar{srv: srv, services: c.services}
}

// registrar is a grpc.ServiceRegistrar that tells services of what it
// registers.
type registrar struct {
	srv      grpc.ServiceRegistrar
	services *services
}

// RegisterService implements grpc.ServiceRegistrar.
func (r registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	r.srv.RegisterService(desc, impl)
	r.services.add(desc, impl)
}

// ServePeers serves the peer port on lis (Peers.Listen) until Close: the
// calls peers forward because this replica owns their keys, and the
// replicas' purges and syncs. Every call must come from a replica of the
// release (its token and, with the TLS files, its certificate).
func (c *Collapser) ServePeers(lis net.Listener) error {
	if c.peer == nil {
		return fmt.Errorf("collapser: no peers (Options.Peers.Target)")
	}
	return c.peer.Serve(lis)
}

// Close stops the peer port, once the calls it serves have ended, and
// closes the connections to the other replicas. A Collapser without peers
// holds nothing to close.
func (c *Collapser) Close() error {
	if c.fleet == nil {
		return nil
	}
	c.peer.GracefulStop()
	return c.fleet.Close()
}

// joinPeers dials the replicas o.Peers names; none when it names no
// Target.
func (c *Collapser) joinPeers(o Options) (proxy.Peers, error) {
	if o.Peers.Target == "" {
		return nil, nil
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The calls between replicas carry the trace context, as the sidecar's do.
	f, err := fleet.Dial(o.Peers.settings(), logger, tracing.HandlersOf(o.TracerProvider).DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("collapser: Peers: %w", err)
	}
	c.fleet = f
	return f.Ring(), nil
}

// services are the application's services (Registrar), which run the
// calls peers forward.
type services struct {
	mu      sync.RWMutex
	methods map[string]serviceMethod // full method name → its handler
	unary   grpc.UnaryServerInterceptor
	stream  grpc.StreamServerInterceptor
}

// serviceMethod is one registered method's handler.
type serviceMethod struct {
	impl   any
	unary  *grpc.MethodDesc // nil for a stream
	stream *grpc.StreamDesc
}

// add remembers desc's methods, served by impl.
func (s *services) add(desc *grpc.ServiceDesc, impl any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.methods == nil {
		s.methods = map[string]serviceMethod{}
	}
	for i := range desc.Methods {
		s.methods["/"+desc.ServiceName+"/"+desc.Methods[i].MethodName] = serviceMethod{impl: impl, unary: &desc.Methods[i]}
	}
	for i := range desc.Streams {
		s.methods["/"+desc.ServiceName+"/"+desc.Streams[i].StreamName] = serviceMethod{impl: impl, stream: &desc.Streams[i]}
	}
}

// method returns the handler of method.
func (s *services) method(method string) (serviceMethod, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.methods[method]
	if !ok {
		return m, status.Errorf(codes.Unimplemented, "collapser: no service registered through Registrar serves %s", method)
	}
	return m, nil
}

// Invoke implements grpc.ClientConnInterface: services are the engine's
// backend for the unary calls peers forward. The handler runs in
// forwardedContext, on a request decoded from the engine's.
func (s *services) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	m, err := s.method(method)
	if err != nil {
		return err
	}
	if m.unary == nil {
		return status.Errorf(codes.Internal, "collapser: %s is a streaming method", method)
	}
	payload, _ := proxy.Wire(args)
	decode := func(req any) error {
		msg, ok := req.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "collapser: the request of %s is %T, not a protobuf message", method, req)
		}
		if err := proto.Unmarshal(payload, msg); err != nil {
			return status.Errorf(codes.Internal, "collapser: decode the request of %s: %v", method, err)
		}
		return nil
	}
	stream := &recorder{method: method}
	out, err := m.unary.Handler(m.impl, grpc.NewContextWithServerTransportStream(forwardedContext(ctx), stream), decode, s.unary)
	b, header, trailer, err := ran(method, stream, out, err)
	return settle(reply, opts, b, header, trailer, err)
}

// NewStream implements grpc.ClientConnInterface: the streams peers
// forward run their handler as the stream interceptor's do (streamConn).
func (s *services) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	m, err := s.method(method)
	if err != nil {
		return nil, err
	}
	if m.stream == nil {
		return nil, status.Errorf(codes.Internal, "collapser: %s is a unary method", method)
	}
	handler := m.stream.Handler
	if s.stream != nil {
		info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: m.stream.ClientStreams, IsServerStream: m.stream.ServerStreams}
		handler = func(srv any, ss grpc.ServerStream) error { return s.stream(srv, ss, info, m.stream.Handler) }
	}
	return (&streamConn{srv: m.impl, handler: handler}).NewStream(ctx, desc, method, opts...)
}

// forwardedContext is the context the handler of a call a peer forwarded
// runs in: the engine's call's deadline, cancellation and span, with the
// caller's headers (the engine call's outgoing metadata) as its incoming
// metadata, never the peer's own headers, and no outgoing metadata.
// peer.FromContext names the replica that forwarded it.
func forwardedContext(engine context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(engine)
	return metadata.NewIncomingContext(metadata.NewOutgoingContext(engine, nil), md)
}
