package hello

import (
	"strings"
	"testing"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestReplyBytes_PadsGreetingsOfEveryMethodToTheSize(t *testing.T) {
	c := startServer(t, Options{ReplyBytes: 1000})
	ctx := testkit.Context(t)
	r, err := c.greeter.SayHello(ctx, &hellov1.HelloRequest{Name: "world"})
	if err != nil {
		t.Fatalf("SayHello: %v", err)
	}
	want := "Hello, world" + strings.Repeat(".", 1000-len("Hello, world"))
	if r.GetMessage() != want {
		t.Errorf("SayHello message = %d bytes %.20q..., want %d bytes", len(r.GetMessage()), r.GetMessage(), len(want))
	}
	stream, err := c.greeter.StreamHellos(ctx, &hellov1.HelloRequest{Name: "world", Count: 2})
	if err != nil {
		t.Fatalf("StreamHellos: %v", err)
	}
	for i := range 2 {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("StreamHellos reply %d: %v", i, err)
		}
		if r.GetMessage() != want {
			t.Errorf("StreamHellos reply %d = %d bytes, want %d", i, len(r.GetMessage()), len(want))
		}
	}
}

func TestReplyBytes_NeverCutsALongerGreeting(t *testing.T) {
	c := startServer(t, Options{ReplyBytes: 3})
	r, err := c.greeter.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "world"})
	if err != nil {
		t.Fatalf("SayHello: %v", err)
	}
	if r.GetMessage() != "Hello, world" {
		t.Errorf("message = %q, want %q", r.GetMessage(), "Hello, world")
	}
}
