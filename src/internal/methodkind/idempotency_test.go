package methodkind

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/collapser/collapser/src/internal/testkit"
)

// ordersFile declares test.v1.Orders with one unary method per
// idempotency level, as a real API would annotate them.
func ordersFile() *descriptorpb.FileDescriptorProto {
	method := func(name string, level *descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(".test.v1.Order"), OutputType: proto.String(".test.v1.Order")}
		if level != nil {
			m.Options = &descriptorpb.MethodOptions{IdempotencyLevel: level}
		}
		return m
	}
	return &descriptorpb.FileDescriptorProto{
		Name:        proto.String("test/v1/orders.proto"),
		Package:     proto.String("test.v1"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Order")}},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Orders"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("GetOrder", descriptorpb.MethodOptions_NO_SIDE_EFFECTS.Enum()),
				method("PutOrder", descriptorpb.MethodOptions_IDEMPOTENT.Enum()),
				method("CreateOrder", nil),
			},
		}},
	}
}

var ordersMethods = map[string]Idempotency{
	"/test.v1.Orders/GetOrder":    NoSideEffects,
	"/test.v1.Orders/PutOrder":    Idempotent,
	"/test.v1.Orders/CreateOrder": Unannotated,
}

func TestResolver_LearnsIdempotencyLevelsFromReflection(t *testing.T) {
	r, err := NewResolver(Options{Backend: startReflection(t, newFiles(t, ordersFile())), UseReflection: true})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	testkit.WaitFor(t, "Orders learned", func() bool { return r.Method("/test.v1.Orders/GetOrder").Kind == Unary })
	for m, want := range ordersMethods {
		if got := r.Method(m); got.Kind != Unary || got.Idempotency != want || requestName(got) != "test.v1.Order" {
			t.Errorf("Method(%s) = %v %v, request %q; want unary %v, request test.v1.Order", m, got.Kind, got.Idempotency, requestName(got), want)
		}
	}
	if got := r.Methods(); !slices.Equal(got, []string{"/test.v1.Orders/CreateOrder", "/test.v1.Orders/GetOrder", "/test.v1.Orders/PutOrder"}) {
		t.Errorf("Methods() = %v", got)
	}
}

func TestNewResolver_DescriptorSetGivesIdempotencyLevels(t *testing.T) {
	r, err := NewResolver(Options{DescriptorSetPath: writeDescriptorSet(t, ordersFile())})
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range ordersMethods {
		if got := r.Method(m).Idempotency; got != want {
			t.Errorf("Method(%s).Idempotency = %v, want %v", m, got, want)
		}
	}
}
