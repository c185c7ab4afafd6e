// Package mdsize estimates the memory a gRPC metadata map holds, for the
// bounds of what the sidecar keeps: cached responses and kept streams.
package mdsize

import "google.golang.org/grpc/metadata"

// Per-object overheads Of counts besides the bytes of names and values.
const (
	// entryOverhead is one map entry: its slot and its value slice's header.
	entryOverhead = 64
	// stringOverhead is one value's string header.
	stringOverhead = 16
)

// Of returns the bytes md holds: every name and value, and the overheads
// of its entries and values.
func Of(md metadata.MD) int64 {
	var n int64
	for k, vs := range md {
		n += entryOverhead + int64(len(k))
		for _, v := range vs {
			n += stringOverhead + int64(len(v))
		}
	}
	return n
}
