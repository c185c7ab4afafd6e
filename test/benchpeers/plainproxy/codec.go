package main

import (
	"fmt"

	"google.golang.org/grpc/mem"
)

// frame is one gRPC message as its bytes on the wire.
type frame struct {
	payload []byte
}

// rawCodec moves *frame values without decoding them. It is forced on the
// proxy's server and on its backend calls, never registered globally.
type rawCodec struct{}

// Marshal returns the frame's bytes without copying them.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
}

// Unmarshal copies the received bytes into the frame: grpc-go reuses data
// once Unmarshal returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	f.payload = data.Materialize()
	return nil
}

// Name is "proto", so the backend reads application/grpc+proto, which is
// what the caller sent.
func (rawCodec) Name() string {
	return "proto"
}
