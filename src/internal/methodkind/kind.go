// Package methodkind tells what the sidecar knows of each gRPC method: its
// call kind (a unary call may be collapsed and a server stream replayed, as
// the policy decides; every other kind passes through), its protobuf
// idempotency_level (which says whether collapsing and caching it is safe)
// and, when a descriptor gives it, its request message's descriptor.
//
// A Resolver learns method kinds from three sources: an explicit list of unary
// methods, a FileDescriptorSet file, and the backend's server reflection
// (grpc.reflection.v1, falling back to v1alpha). The explicit sources are
// loaded once by NewResolver and win over reflection when they disagree: they
// are the operator's deliberate statement, and they keep working when the
// backend hides or lacks reflection. Reflection is asked by Run, at start and
// whenever Resolver.Method meets a method it does not know.
package methodkind

import "google.golang.org/protobuf/reflect/protoreflect"

// Kind is the streaming shape of a method.
type Kind uint8

// The kinds of a method. Unary calls may be collapsed and ServerStreaming
// ones replayed; Unknown is treated like a streaming call (passed through).
const (
	Unknown Kind = iota
	Unary
	ServerStreaming
	ClientStreaming
	BidiStreaming
)

// String returns the kind in snake case, e.g. "server_streaming".
func (k Kind) String() string {
	switch k {
	case Unary:
		return "unary"
	case ServerStreaming:
		return "server_streaming"
	case ClientStreaming:
		return "client_streaming"
	case BidiStreaming:
		return "bidi_streaming"
	default:
		return "unknown"
	}
}

// Streams reports whether the method is known to stream messages in either
// direction: its calls last as long as the stream, not as long as an answer.
func (k Kind) Streams() bool {
	return k >= ServerStreaming
}

// kindOf maps a method descriptor's streaming flags to its Kind.
func kindOf(clientStreaming, serverStreaming bool) Kind {
	switch {
	case clientStreaming && serverStreaming:
		return BidiStreaming
	case clientStreaming:
		return ClientStreaming
	case serverStreaming:
		return ServerStreaming
	default:
		return Unary
	}
}

// Idempotency is a method's protobuf idempotency_level option
// (google/protobuf/descriptor.proto, MethodOptions).
type Idempotency uint8

// The idempotency levels. Unannotated covers IDEMPOTENCY_UNKNOWN, the
// default of a method without the option, and methods whose descriptor is not
// known.
const (
	Unannotated Idempotency = iota
	NoSideEffects
	Idempotent
)

// String returns the level as protobuf spells it.
func (i Idempotency) String() string {
	switch i {
	case NoSideEffects:
		return "NO_SIDE_EFFECTS"
	case Idempotent:
		return "IDEMPOTENT"
	default:
		return "IDEMPOTENCY_UNKNOWN"
	}
}

// Method is what is known of one method.
type Method struct {
	Kind        Kind
	Idempotency Idempotency
	// Request is the descriptor of the method's request message, from the
	// source that described the method, with every message and enum it uses
	// resolved. It is nil when no source described the method (one known
	// only from UnaryMethods) or when that source lacks a file the message
	// needs (a descriptor set built without its imports). Each reflection
	// refresh builds new descriptors, equal or not: compare them by content,
	// not by pointer.
	Request protoreflect.MessageDescriptor
}
