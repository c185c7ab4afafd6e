package proxy

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusingStream is a caller's stream whose every send fails with err.
type refusingStream struct {
	grpc.ServerStream
	ctx context.Context
	err error
}

func (s refusingStream) Context() context.Context { return s.ctx }
func (s refusingStream) SendMsg(any) error        { return s.err }

func TestSendToCaller_ARefusedSendIsTheCallersOwnEnd(t *testing.T) {
	// grpc-go's answer to a write on a stream it has just marked done,
	// before it cancels the stream's context.
	streamDone := status.Error(codes.Internal, "Unexpected error from context packet: <nil>")
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
		{"sent", live, nil, codes.OK},
		{"stream done before its context", live, streamDone, codes.Canceled},
		{"stream done as the deadline passes", nearDeadline, streamDone, codes.DeadlineExceeded},
		{"caller cancelled", cancelled, status.Error(codes.Canceled, "context canceled"), codes.Canceled},
		{"over the send limit", live, status.Error(codes.ResourceExhausted, "trying to send message larger than max"), codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sendToCaller(refusingStream{ctx: tt.ctx, err: tt.err}, &frame{})
			if got := status.Code(err); got != tt.want {
				t.Errorf("sendToCaller = %v, want code %v", err, tt.want)
			}
		})
	}
}
