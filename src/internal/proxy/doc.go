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
//     again from the cache, fresh or stale, for the windows its rule or its
//     own cache-control gives it (freshness.go). A private answer goes only
//     to its own caller and leaves a pass marker: for a while the key's
//     callers make calls of their own rather than wait for one another
//     (outcome pass).
//   - replay (replay.go): identical calls of a server-streaming method read one
//     backend stream through a replay.Streams record, from its first message,
//     and a stream that ended well may be replayed whole for a while.
//   - pass through (passthrough.go): every other call is forwarded frame by
//     frame in both directions, with headers, trailers, status, cancellation
//     and deadline. The success of a call whose rule names what it
//     invalidates purges that on every replica before its caller gets its
//     status (invalidate.go).
//
// With peers (peer.go), each key has an owner among the replicas, and where
// its shared call is made depends on the key and its method:
//   - a key this replica owns is served here, under the same entries as the
//     calls peers forward for it; for a while after the replicas changed, a
//     key that moved here is first asked of its previous owner, which hands
//     the answer it holds over (handoff.go);
//   - a key another replica owns is forwarded to its owner when package
//     forwarding says so: while its method's forwarded calls share at the
//     owner, and otherwise for a hot key (its calls were shared here
//     lately) or one in the sample, and always while the ring's
//     connection to the owner is being made (the owner may be this replica
//     itself: its peer port then meets the key's calls under its owner's
//     entries). The calls go through one connection to the replicas whose
//     ring_hash balancer picks the owner, and the owner serves them on its
//     peer port with its own backend;
//   - any other call of a key another replica owns is kept: made here, with
//     the local backend (OwnerKept), as is a call whose owner could not be
//     reached.
//
// Replayed streams are always forwarded to their key's owner. Where a call
// came from (a caller or a peer) is an origin value that every path reads. A
// replica serves nothing it keeps, and shares no call, past the time it was
// last told it may (CoherentUntil, from package coherence). The admin
// service's purges (purge.go) take back the answers and records of this
// proxy; reaching the other replicas is the admin package's work.
//
// With a TracerProvider (trace.go), every caller's server span says how its
// call was served, and links to the span of the call that answered it when
// that call was another's; the one call a flight makes has a span of its
// own, whose context the backend call carries.
//
// The shape follows github.com/mwitkow/grpc-proxy: a raw codec, a director-free
// handler that forwards frames, and errors that name the direction that failed.
package proxy
