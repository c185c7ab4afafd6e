package heapsize

import (
	"unsafe"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The objects a status error is made of, as allocated: grpc's status error
// and its Status are each a struct of one pointer, the error's to its
// Status, the Status's to its google.rpc.Status message.
var (
	statusObject = Of(int(unsafe.Sizeof(status.Status{})))
	statusProto  = Of(int(unsafe.Sizeof(spb.Status{})))
	anyProto     = Of(int(unsafe.Sizeof(anypb.Any{})))
)

// pointer is a pointer's size, in an array of them.
const pointer = int(unsafe.Sizeof(uintptr(0)))

// StatusErr returns what err, a status error as grpc's status package makes
// one (status.Convert(err).Err()), holds: the error, its Status and the
// message they point to (see Status). Nil holds nothing.
//
// The status package lends its message only as a copy (Status.Proto), of
// the same shape as what the wire's decoding allocates: StatusErr makes
// that copy and drops it, so an answer is sized once, when it is kept.
func StatusErr(err error) int64 {
	if err == nil {
		return 0
	}
	return 2*statusObject + Status(status.Convert(err).Proto())
}

// Status returns what s, a google.rpc.Status decoded from the wire, holds:
// the message, its text, its details' array at its capacity and each
// detail (an Any) with its type URL and value, unknown fields included.
func Status(s *spb.Status) int64 {
	if s == nil {
		return 0
	}
	n := statusProto + String(s.GetMessage()) + unknown(s) + Of(cap(s.GetDetails())*pointer)
	for _, d := range s.GetDetails() {
		n += anyProto + String(d.GetTypeUrl()) + Bytes(d.GetValue()) + unknown(d)
	}
	return n
}

// unknown returns what m's unknown fields hold: what the wire had that its
// type does not know, kept as bytes.
func unknown(m proto.Message) int64 {
	return Bytes(m.ProtoReflect().GetUnknown())
}
