// Package serverlimits holds the bounds the sidecar's gRPC server puts on
// what callers can make it hold: connections, streams per connection,
// request header bytes, and connections kept open by idle or silent peers.
// Each bound is set where the resource is created, with grpc-go's and the
// standard library's own mechanisms.
//
// With the defaults, what callers can make the sidecar hold at once is at
// most MaxConnections × MaxConcurrentStreams streams. A stream waiting for
// its request message costs one or two goroutines (a few KiB of stack) and
// its share of the connection's buffers; one that has sent its request also
// holds that message (at most the largest request accepted) until its call
// ends. Unary calls must deliver their request within the proxy's receive
// timeout; streams are bounded only by their callers' deadlines and the
// keepalive below.
package serverlimits

import (
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Defaults of Limits.
const (
	// DefaultMaxConnections bounds the connections served at once. One
	// client needs one connection for any number of calls; a burst of new
	// connections beyond it waits in the listen backlog until one closes.
	DefaultMaxConnections = 1000
	// DefaultMaxConcurrentStreams bounds the calls one connection may have
	// open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); grpc-go clients
	// queue calls beyond it, a stream opened beyond it is refused.
	DefaultMaxConcurrentStreams = 1000
	// DefaultMaxHeaderBytes bounds the header list of a request (HTTP/2
	// SETTINGS_MAX_HEADER_LIST_SIZE), method name and metadata included:
	// callers choose both, and both become part of request keys and labels.
	DefaultMaxHeaderBytes = 64 << 10
)

// Keepalive settings: fixed, as they only need to be sane.
const (
	// keepaliveMinTime is the shortest interval at which a client may ping;
	// a client pinging more often is sent GOAWAY (ENHANCE_YOUR_CALM). grpc-go
	// clients never ping more often than every 10 s.
	keepaliveMinTime = 10 * time.Second
	// pingTime is how long a connection may be silent before the server pings
	// the client, and pingTimeout how long it waits for the answer before it
	// closes a connection whose peer has gone.
	pingTime    = time.Minute
	pingTimeout = 20 * time.Second
	// maxConnectionIdle closes a connection that has had no call for this
	// long, so idle clients do not hold connection slots for ever.
	maxConnectionIdle = 5 * time.Minute
)

// Limits are the bounds of one server. Zero fields take the defaults.
type Limits struct {
	// MaxConnections bounds the connections served at once
	// (default DefaultMaxConnections).
	MaxConnections int
	// MaxConcurrentStreams bounds the calls open at once on one connection
	// (default DefaultMaxConcurrentStreams).
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds a request's header list (default DefaultMaxHeaderBytes).
	MaxHeaderBytes uint32
}

func (l Limits) withDefaults() Limits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// ServerOptions returns the grpc.Server options that enforce l: streams per
// connection, header bytes and keepalive (enforcement of client pings,
// server pings of silent peers, and closing idle connections).
func (l Limits) ServerOptions() []grpc.ServerOption {
	l = l.withDefaults()
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(l.MaxHeaderBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: pingTime, Timeout: pingTimeout, MaxConnectionIdle: maxConnectionIdle,
		}),
	}
}

// Listener returns lis accepting at most l.MaxConnections connections at once.
func (l Limits) Listener(lis net.Listener) net.Listener {
	return netutil.LimitListener(lis, l.withDefaults().MaxConnections)
}
