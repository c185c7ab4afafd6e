package replay

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// BenchmarkReaderNext is a follower reading a recorded stream: the cost per
// follower per message, without gRPC around it.
func BenchmarkReaderNext(b *testing.B) {
	const messages = 1000
	s := New(Options{})
	src := newSource(nil)
	rd, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
	ctx := context.Background()
	if _, err := rd.Header(ctx); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64)
	go func() {
		for range messages {
			src.up.msgs <- msg
		}
		close(src.up.msgs)
	}()
	for {
		if _, err := rd.Next(ctx); err != nil {
			break
		}
	}
	rd.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N / messages {
		rd, o := s.Join("k", Life{TTL: time.Hour}, nil)
		if o != Replay {
			b.Fatalf("outcome %v, want a replay", o)
		}
		if _, err := rd.Header(ctx); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := rd.Next(ctx); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
		rd.Close()
	}
}
