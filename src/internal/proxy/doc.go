// Package proxy is the collapser sidecar's transparent gRPC forwarder.
//
// A Proxy is installed on a grpc.Server as its unknown-service handler
// (grpc.UnknownServiceHandler), so it sees every call the server has no
// registered service for, without knowing any message types. Messages travel
// as raw frames through a codec set on that one server (grpc.ForceServerCodecV2)
// and never registered globally: other servers and clients in the process keep
// the standard protobuf codec.
//
// Its Rules decide per method what happens to a call:
//   - collapse (unary.go): identical requests (same key from the
//     requestkey.Rule) share one backend call through a collapse.Group, and
//     every caller receives exactly what that call produced: the response
//     bytes, headers, trailers and status; a successful answer may be served
//     again from the cache, fresh or stale, and a private one goes only to its
//     own caller.
//   - replay (replay.go): identical calls of a server-streaming method read one
//     backend stream through a replay.Streams record, from its first message,
//     and a stream that ended well may be replayed whole for a while.
//   - pass through (passthrough.go): every other call is forwarded frame by
//     frame in both directions, with headers, trailers, status, cancellation
//     and deadline.
//
// With peers (peer.go), the shared call or stream of a key is made by the
// replica that owns the key: its callers' calls go through one connection to
// the replicas whose ring_hash balancer picks the owner, and the owner serves
// what it is forwarded on its peer port, with its own backend. Where a call
// came from (a caller or a peer) is an origin value that every path reads.
//
// With a TracerProvider (trace.go), every caller's server span says how its
// call was served, and links to the span of the call that answered it when
// that call was another's; the one call a flight makes has a span of its
// own, whose context the backend call carries.
//
// The shape follows github.com/mwitkow/grpc-proxy: a raw codec, a director-free
// handler that forwards frames, and errors that name the direction that failed.
package proxy
