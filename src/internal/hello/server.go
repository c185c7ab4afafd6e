// Package hello implements the hello backend: a deliberately slow Greeter
// that counts every request it receives, and the Stats service that reports
// those counts, so a client can compare what it sent with what the backend
// really served.
//
// Every Greeter RPC counts as one request of its method, whatever the number
// of messages it carries, and is counted when it arrives, before any
// validation or waiting. Each reply carries the caller (see Caller) and the
// method's count at arrival ("call"). Every RPC also gets a response header
// "x-hello-call" (the call number) and a trailer "x-hello-served-by", so
// header and trailer forwarding is visible to a client.
package hello

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

const (
	// HeaderCall is the response header holding the RPC's call number.
	HeaderCall = "x-hello-call"
	// TrailerServedBy is the response trailer naming the serving instance.
	TrailerServedBy = "x-hello-served-by"
	// HeaderTags is the response header GetGreeting and SetGreeting tag
	// their answers in: the sidecar's default tags header.
	HeaderTags = "collapser-tags"
	// DefaultServedBy is the TrailerServedBy value when Options.ServedBy is "".
	DefaultServedBy = "hello"
	// MaxStreamCount is the largest HelloRequest.count StreamHellos accepts.
	MaxStreamCount = 10000
	// MaxStreamIntervalMs is the largest HelloRequest.interval_ms accepted.
	MaxStreamIntervalMs = 60_000
)

// Options configure a Server.
type Options struct {
	// Latency is how long a Greeter request waits before it is answered
	// (SayHello, StreamHellos: before the first reply; CollectHellos: after the
	// client closes its side; Chat: before each reply). 0 = no wait.
	Latency time.Duration
	// ServedBy is the TrailerServedBy value; "" = DefaultServedBy.
	ServedBy string
	// StreamInterval is the time between two StreamHellos replies of a
	// request that asks for none. 0 = no wait.
	StreamInterval time.Duration
	// ReplyBytes pads every reply's greeting with '.' to at least this many
	// bytes, for loads with answers of a given size. 0 = no padding.
	ReplyBytes int
	// Registerer receives the counter hello_requests_total{method}; nil = the
	// counter is not exported.
	Registerer prometheus.Registerer
}

// Server is the hello backend: the Greeter and Stats services over one set of
// counters. Register it on a grpc.Server.
type Server struct {
	latency        time.Duration
	streamInterval time.Duration
	servedBy       string
	replyBytes     int
	counts         counts
	greetings      greetings
	requests       [len(greeterMethods)]prometheus.Counter // children of hello_requests_total, by method
}

// New returns a Server configured by o, with its counter registered.
func New(o Options) (*Server, error) {
	s := &Server{latency: o.Latency, streamInterval: o.StreamInterval, servedBy: o.ServedBy, replyBytes: o.ReplyBytes}
	if s.servedBy == "" {
		s.servedBy = DefaultServedBy
	}
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hello_requests_total",
		Help: "Greeter requests the hello backend received, by full gRPC method name.",
	}, []string{"method"})
	for i, name := range greeterMethods {
		s.requests[i] = vec.WithLabelValues(name)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(vec); err != nil {
			return nil, fmt.Errorf("hello: register hello_requests_total: %w", err)
		}
	}
	return s, nil
}

// Register registers the Greeter and Stats services on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	hellov1.RegisterGreeterServer(r, greeter{s: s})
	hellov1.RegisterStatsServer(r, stats{s: s})
}

// receive counts one request of m, announces its call number in the response
// header and the serving instance in the trailer, and returns the call number.
func (s *Server) receive(ctx context.Context, m method) (int64, error) {
	call := s.counts.add(m)
	s.requests[m].Inc()
	if err := grpc.SetHeader(ctx, metadata.Pairs(HeaderCall, strconv.FormatInt(call, 10))); err != nil {
		return call, status.Errorf(codes.Internal, "set header: %v", err)
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs(TrailerServedBy, s.servedBy)); err != nil {
		return call, status.Errorf(codes.Internal, "set trailer: %v", err)
	}
	return call, nil
}

// wait sleeps the configured latency, or returns the status of ctx's end.
func (s *Server) wait(ctx context.Context) error {
	return sleep(ctx, s.latency)
}

// sleep waits d (nothing for d <= 0), or returns the status of ctx's end.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// reply builds the greeting for name, padded to the server's ReplyBytes.
func (s *Server) reply(ctx context.Context, name string, call int64) *hellov1.HelloReply {
	msg := "Hello, " + name
	if pad := s.replyBytes - len(msg); pad > 0 {
		msg += strings.Repeat(".", pad)
	}
	return &hellov1.HelloReply{Message: msg, Caller: callerFrom(ctx), Call: call}
}
