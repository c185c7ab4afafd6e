package demo

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// burstSpec is one burst to send: identical SayHello requests.
type burstSpec struct {
	requests      int
	concurrency   int // at most this many in flight; 0 or more than requests = all at once
	name          string
	distinct      bool        // request n is named name-n
	rate          int         // requests per second of a steady load (sendSteady); 0: a burst
	keys          int         // a steady load's request n is named name-(n modulo keys); 0: none
	authorization string      // "" = no authorization header
	stream        *streamSpec // nil: SayHello calls
	timeout       time.Duration
}

// streamSpec makes a burst's requests StreamHellos calls.
type streamSpec struct {
	messages   int // replies each call asks for
	intervalMs int // between two replies
}

// result is what one request produced.
type result struct {
	complete bool // a stream's replies: all of them, of one backend call, in order
	latency  time.Duration
	code     codes.Code
	caller   string // reply's caller; only for code OK
	call     int64  // reply's call number; only for code OK
	status   string // the answer's cache-status entries, their ttl left out
}

// progress counts requests across all running bursts.
type progress struct {
	total atomic.Int64 // requests planned
	sent  atomic.Int64 // requests started
	done  atomic.Int64 // requests finished, with any outcome
}

// sendBurst sends spec's requests, each worker through one of clients in
// turn, and returns each request's result (indexed by request) and the
// burst's wall time.
func sendBurst(ctx context.Context, clients []hellov1.GreeterClient, spec burstSpec, p *progress) ([]result, time.Duration) {
	if spec.authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", spec.authorization)
	}
	same := &hellov1.HelloRequest{Name: spec.name}
	results := make([]result, spec.requests)
	workers := spec.concurrency
	if workers <= 0 || workers > spec.requests {
		workers = spec.requests
	}
	var next atomic.Int64 // index of the next request to send
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		client := clients[w%len(clients)]
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(spec.requests); i = next.Add(1) - 1 {
				p.sent.Add(1)
				req := same
				if spec.distinct {
					req = &hellov1.HelloRequest{Name: spec.nameOf(int(i))}
				}
				if spec.stream != nil {
					results[i] = streamHellos(ctx, client, req, *spec.stream, spec.timeout)
				} else {
					results[i] = sayHello(ctx, client, req, spec.timeout)
				}
				p.done.Add(1)
			}
		})
	}
	wg.Wait()
	return results, time.Since(start)
}

// sayHello sends one request, bounded by timeout when it is positive.
func sayHello(ctx context.Context, client hellov1.GreeterClient, req *hellov1.HelloRequest, timeout time.Duration) result {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start := time.Now()
	var header, trailer metadata.MD
	reply, err := client.SayHello(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
	r := result{latency: time.Since(start), code: status.Code(err), status: cacheStatusOf(header, trailer)}
	if err == nil {
		r.caller, r.call = reply.GetCaller(), reply.GetCall()
	}
	return r
}

// streamHellos makes one StreamHellos call of spec and reads it to its end,
// bounded by timeout when it is positive.
func streamHellos(ctx context.Context, client hellov1.GreeterClient, req *hellov1.HelloRequest, spec streamSpec, timeout time.Duration) result {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req = &hellov1.HelloRequest{Name: req.GetName(), Count: int32(spec.messages), IntervalMs: int32(spec.intervalMs)}
	start := time.Now()
	stream, err := client.StreamHellos(ctx, req)
	if err != nil {
		return result{latency: time.Since(start), code: status.Code(err)}
	}
	var first *hellov1.HelloReply
	n, consistent := 0, true
	for {
		reply, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return result{latency: time.Since(start), code: status.Code(err)}
		}
		if first == nil {
			first = reply
		}
		consistent = consistent && proto.Equal(reply, first)
		n++
	}
	header, _ := stream.Header()
	r := result{latency: time.Since(start), code: codes.OK, complete: consistent && n == spec.messages,
		status: cacheStatusOf(header, stream.Trailer())}
	if first != nil {
		r.caller, r.call = first.GetCaller(), first.GetCall()
	}
	return r
}

// ttlParam matches the ttl parameter of a cache-status entry.
var ttlParam = regexp.MustCompile(`; ttl=-?[0-9]+`)

// cacheStatusOf returns the cache-status entries of an answer (in its
// header, or the trailer of a trailers-only answer), without their ttl,
// which differs from answer to answer: what is left is how it was served.
func cacheStatusOf(header, trailer metadata.MD) string {
	entries := header.Get("cache-status")
	if len(entries) == 0 {
		entries = trailer.Get("cache-status")
	}
	return ttlParam.ReplaceAllString(strings.Join(entries, ", "), "")
}
