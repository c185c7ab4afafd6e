package proxy

import (
	"fmt"

	"google.golang.org/grpc"

	"google.golang.org/grpc/encoding"
	// Registers the standard "proto" codec, the fallback for typed messages.
	_ "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as the bytes on the wire, never decoded, copied
// out of grpc-go's buffers: it may be shared and kept (collapsed answers,
// records of streams).
type frame struct {
	payload []byte
}

// passFrame is a message passed straight through: it holds grpc-go's own
// buffers from the receive to the send, which frees them, with no copy.
type passFrame struct {
	data mem.BufferSlice
}

// free gives back the buffers of a frame that will not be sent.
func (f *passFrame) free() {
	f.data.Free()
	f.data = nil
}

// codec moves *frame values as raw bytes and hands every other value (a
// proto.Message of a service registered on the same server, such as
// grpc.health.v1) to the standard proto codec.
//
// It is given to one server with grpc.ForceServerCodecV2 and to backend calls
// with grpc.ForceCodecV2; it is never registered with encoding.RegisterCodecV2,
// which would replace the process-wide "proto" codec.
type codec struct {
	proto encoding.CodecV2
}

// newCodec returns the raw codec with the registered proto codec as fallback.
func newCodec() (*codec, error) {
	p := encoding.GetCodecV2(codecName)
	if p == nil {
		return nil, fmt.Errorf("proxy: no %q codec registered", codecName)
	}
	return &codec{proto: p}, nil
}

// codecName is the codec's content-subtype. Backend calls made with
// grpc.ForceCodecV2 and no explicit subtype announce "application/grpc+proto",
// which servers treat exactly like "application/grpc".
const codecName = "proto"

// Marshal returns a frame's bytes without copying; grpc-go only reads them.
// A passFrame's buffers go to grpc-go, which frees them once written.
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	switch f := v.(type) {
	case *frame:
		// A pointer to the payload is a Buffer as it is: a SliceBuffer
		// value would be copied to the heap to become one.
		return mem.BufferSlice{(*mem.SliceBuffer)(&f.payload)}, nil
	case *passFrame:
		data := f.data
		f.data = nil
		return data, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal copies the received bytes into a frame: grpc-go frees data once
// Unmarshal returns, and a frame may outlive the call (it is shared and
// cached). A passFrame takes a reference to data instead, until it is sent.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch f := v.(type) {
	case *frame:
		f.payload = data.Materialize()
		return nil
	case *passFrame:
		data.Ref()
		f.data = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// Name returns the content-subtype, "proto".
func (c *codec) Name() string {
	return codecName
}

// callOptions are the options of every backend call for a caller that used
// content subtype sub and addressed authority: the raw codec (so frames pass
// untouched), the caller's subtype (so the backend decodes them as the caller
// meant), the caller's authority (so a backend serving several hosts answers
// for the right one) and the size limits.
func (p *Proxy) callOptions(sub, authority string) []grpc.CallOption {
	opts := make([]grpc.CallOption, 0, len(p.backendOptions)+4) // room for the caller's additions
	opts = append(opts, p.backendOptions...)
	if sub != "" {
		opts = append(opts, grpc.CallContentSubtype(sub))
	}
	if authority != "" {
		opts = append(opts, grpc.CallAuthority(authority))
	}
	return opts
}
