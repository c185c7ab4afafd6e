package proxy

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRefusedWrite_IsTheCallersOwnEndUnlessTheMessageIsTooLarge(t *testing.T) {
	// grpc-go's answers to writes on a stream it has just marked done,
	// before it cancels the stream's context.
	headerRefused := status.Error(codes.Internal, "transport: SendHeader called multiple times")
	sendRefused := status.Error(codes.Internal, "Unexpected error from context packet: <nil>")
	live := context.Background()
	nearDeadline, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want codes.Code
	}{
		{"header, stream done before its context", live, headerRefused, codes.Canceled},
		{"header, stream done as the deadline passes", nearDeadline, headerRefused, codes.DeadlineExceeded},
		{"message, stream done before its context", live, sendRefused, codes.Canceled},
		{"message, caller cancelled", cancelled, status.Error(codes.Canceled, "context canceled"), codes.Canceled},
		{"message over the send limit", live, status.Error(codes.ResourceExhausted, "trying to send message larger than max"), codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(refusedWrite(tt.ctx, tt.err)); got != tt.want {
				t.Errorf("refusedWrite(%v) has code %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
