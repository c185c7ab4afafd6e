package testkit

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// Streamed is what a caller read of one StreamHellos call.
type Streamed struct {
	Header, Trailer metadata.MD
	Replies         []*hellov1.HelloReply
	// Err is the stream's status; nil for OK.
	Err error
}

// Messages returns the messages of the replies, in order.
func (s Streamed) Messages() []string {
	m := make([]string, len(s.Replies))
	for i, r := range s.Replies {
		m[i] = r.GetMessage()
	}
	return m
}

// ReadStream makes one StreamHellos call of req through c and reads it to
// its end.
func ReadStream(ctx context.Context, c hellov1.GreeterClient, req *hellov1.HelloRequest) Streamed {
	stream, err := c.StreamHellos(ctx, req)
	if err != nil {
		return Streamed{Err: err}
	}
	var got Streamed
	got.Header, _ = stream.Header()
	for {
		reply, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				got.Err = err
			}
			got.Trailer = stream.Trailer()
			return got
		}
		got.Replies = append(got.Replies, reply)
	}
}
