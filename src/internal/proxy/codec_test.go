package proxy

import (
	"bytes"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/requestkey"
)

func TestCodec_FramesTravelAsRawBytes(t *testing.T) {
	c, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	in := []byte{0xff, 0x00, 0x01, 'x'} // not a valid protobuf message
	data, err := c.Marshal(&frame{payload: in})
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if got := data.Materialize(); !bytes.Equal(got, in) {
		t.Errorf("Marshal = %x, want %x", got, in)
	}
	var out frame
	if err := c.Unmarshal(data, &out); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	data.Free()
	if !bytes.Equal(out.payload, in) {
		t.Errorf("Unmarshal = %x, want %x", out.payload, in)
	}
}

func TestCodec_ProtoMessagesUseTheStandardCodec(t *testing.T) {
	c, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	in := &hellov1.HelloRequest{Name: "ann", Count: 3}
	data, err := c.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	want, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := data.Materialize(); !bytes.Equal(got, want) {
		t.Errorf("Marshal = %x, want %x", got, want)
	}
	var out hellov1.HelloRequest
	if err := c.Unmarshal(data, &out); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !proto.Equal(&out, in) {
		t.Errorf("Unmarshal = %v, want %v", &out, in)
	}
}

func TestCodec_IsNotRegisteredGlobally(t *testing.T) {
	backend, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	rule, err := requestkey.NewRule(requestkey.RuleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Backend: backend, Rules: passAll{}, KeyRule: rule})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	grpc.NewServer(p.ServerOptions()...).Stop()

	if _, isRaw := encoding.GetCodecV2("proto").(*codec); isRaw {
		t.Error(`encoding.GetCodecV2("proto") is the raw codec, want the standard proto codec`)
	}
}

// passAll passes every method through.
type passAll struct{}

func (passAll) Rule(string) policy.Rule { return policy.Rule{} }
