package callstatus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/callstatus"
	"github.com/collapser/collapser/src/internal/collapse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOf(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		code      codes.Code
		inMessage string
	}{
		{"nil is OK", nil, codes.OK, ""},
		{"the engine's overload", fmt.Errorf("call: %w", collapse.ErrOverloaded), codes.ResourceExhausted, "too many calls in flight"},
		{"a panicking backend call", &collapse.PanicError{Value: "boom"}, codes.Internal, "panicked: boom"},
		{"a cancelled context", context.Canceled, codes.Canceled, ""},
		{"a passed deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded, ""},
		{"the backend's status", status.Error(codes.NotFound, "no such greeting"), codes.NotFound, "no such greeting"},
		{"any other error", errors.New("broken"), codes.Unknown, "broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := callstatus.Of(tt.err)
			if got := callstatus.Code(tt.err); got != tt.code || st.Code() != tt.code {
				t.Errorf("Code() = %v, Of().Code() = %v; want %v", got, st.Code(), tt.code)
			}
			if !strings.Contains(st.Message(), tt.inMessage) {
				t.Errorf("message %q does not say %q", st.Message(), tt.inMessage)
			}
		})
	}
}

func TestEnded(t *testing.T) {
	cancelled := func(deadline time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		cancel()
		return ctx
	}
	passed, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	plain, cancelPlain := context.WithCancel(context.Background())
	cancelPlain()
	tests := []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"cancelled, no deadline", plain, codes.Canceled},
		{"deadline passed", passed, codes.DeadlineExceeded},
		{"cancelled a few ms before its deadline", cancelled(10 * time.Millisecond), codes.DeadlineExceeded},
		{"cancelled long before its deadline", cancelled(time.Hour), codes.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := callstatus.Ended(tt.ctx); got != tt.want {
				t.Errorf("Ended() = %v, want %v", got, tt.want)
			}
		})
	}
}
