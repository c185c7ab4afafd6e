// Package proxy is the collapser sidecar's transparent gRPC forwarder.
//
// A Proxy is installed on a grpc.Server as its unknown-service handler
// (grpc.UnknownServiceHandler), so it sees every call the server has no
// registered service for, without knowing any message types. Messages travel
// as raw frames through a codec set on that one server (grpc.ForceServerCodecV2)
// and never registered globally: other servers and clients in the process keep
// the standard protobuf codec.
//
// Calls to methods the MethodKinds report as unary are collapsed: identical
// requests (same key from the requestkey.Rule) share one backend call through
// a collapse.Group, and every caller receives exactly what that call produced:
// the response bytes, headers, trailers and status. Every other call (streaming
// methods and methods of unknown kind) is passed through frame by frame in both
// directions, with headers, trailers, status, cancellation and deadline
// forwarded.
//
// The shape follows github.com/mwitkow/grpc-proxy: a raw codec, a director-free
// handler that forwards frames, and errors that name the direction that failed.
package proxy
