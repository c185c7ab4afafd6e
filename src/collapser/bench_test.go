package collapser

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The benchmarks measure what the interceptor adds to a call, two ways.
//
// The Intercept... benchmarks call the server interceptor as grpc-go's
// dispatch does, in process, with the metadata a grpc-go client sends, in
// front of a handler that answers at once: their ns/op and allocs/op over
// InterceptNone's (the handler alone) are the interceptor's cost over
// grpc-go's own dispatch.
//
//	InterceptNone  the handler, called as grpc-go calls it (the baseline)
//	InterceptHit   a kept answer
//	InterceptHitNoCacheStatus  the same, without the cache-status entry
//	InterceptFloor the least any interceptor serving a kept answer does
//	InterceptMiss  a new request each call: the handler runs, its answer is kept
//	InterceptJoin  rounds of callers of one request, all but one joining the
//	               run in flight (joinRounds); joined/op says how many did,
//	               cpu-ns/op what a call cost the process (its ns/op is
//	               mostly the rounds' wait for every caller to join)
//	InterceptJoinFloor  the least any join does, in the same rounds
//
// The Loopback... benchmarks make real gRPC calls over loopback, and report
// the process's CPU time per call (cpu-ns/op):
//
//	LoopbackDirect       client → server, no interceptor (the baseline)
//	LoopbackLibraryMiss  client → server with the interceptor, a new request each call
//	LoopbackLibraryHit   client → server with the interceptor, a kept answer
//	LoopbackSidecarHit   client → the engine served as the sidecar serves it, a kept answer

// keepAnHour keeps every answer of SayHello an hour.
const keepAnHour = "default:\n  collapse: true\n  cacheTTL: 1h\n"

// dispatch is a unary call as grpc-go's dispatch hands it to the
// interceptor chain: its context (incoming metadata a grpc-go client
// sends, and the stream), its method and its handler.
type dispatch struct {
	ctx     context.Context
	info    *grpc.UnaryServerInfo
	handler grpc.UnaryHandler
}

// callStream is the stream of one call, as grpc-go's is to an
// interceptor: the header and trailer set on it are merged into its own
// copy (here, one dropped at once: every benchmark call is a new call).
type callStream struct{}

func (callStream) Method() string { return sayHello }

func (callStream) SetHeader(md metadata.MD) error { _ = metadata.Join(nil, md); return nil }

func (callStream) SendHeader(md metadata.MD) error { _ = metadata.Join(nil, md); return nil }

func (callStream) SetTrailer(md metadata.MD) error { _ = metadata.Join(nil, md); return nil }

// newDispatch returns the dispatch of SayHello to a handler that answers
// at once, counting its runs in runs.
func newDispatch(runs *atomic.Int64) dispatch {
	md := metadata.MD{":authority": {"127.0.0.1:50051"}, "content-type": {"application/grpc"},
		"user-agent": {"grpc-go/1.85.0"}, "authorization": {"Bearer ann"}}
	ctx := grpc.NewContextWithServerTransportStream(metadata.NewIncomingContext(context.Background(), md), callStream{})
	return dispatch{ctx: ctx, info: &grpc.UnaryServerInfo{FullMethod: sayHello},
		handler: func(_ context.Context, req any) (any, error) {
			runs.Add(1)
			return &hellov1.HelloReply{Message: "hello " + req.(*hellov1.HelloRequest).GetName()}, nil
		}}
}

func BenchmarkInterceptNone(b *testing.B) {
	var runs atomic.Int64
	d := newDispatch(&runs)
	req := &hellov1.HelloRequest{Name: "ann"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.handler(d.ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInterceptHit(b *testing.B) { benchmarkInterceptHit(b, nil) }

// BenchmarkInterceptHitNoCacheStatus is InterceptHit without the answers'
// cache-status entry (Options.Engine.OmitCacheStatus): what it costs.
func BenchmarkInterceptHitNoCacheStatus(b *testing.B) {
	benchmarkInterceptHit(b, func(o *Options) { o.Engine.OmitCacheStatus = true })
}

func benchmarkInterceptHit(b *testing.B, change func(*Options)) {
	var runs atomic.Int64
	d := newDispatch(&runs)
	c, _ := newCollapser(b, keepAnHour, change)
	req := &hellov1.HelloRequest{Name: "ann"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.serveUnary(d.ctx, req, d.info, d.handler); err != nil {
			b.Fatal(err)
		}
	}
	if runs.Load() != 1 {
		b.Fatalf("handler runs = %d, want 1", runs.Load())
	}
}

// BenchmarkInterceptFloor is the least an interceptor that serves kept
// answers through grpc-go's API does for a hit: it encodes the request to
// look the answer up by its bytes, and decodes the caller's own reply of
// the answer's (callers never share a reply). Nothing else: no header in
// the key, no policy, no counter, no cache-status entry. InterceptHit's
// time and allocations over this one are the engine's own.
func BenchmarkInterceptFloor(b *testing.B) {
	var runs atomic.Int64
	d := newDispatch(&runs)
	req := &hellov1.HelloRequest{Name: "ann"}
	kept := map[string][]byte{}
	key, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	if kept[string(key)], err = proto.Marshal(&hellov1.HelloReply{Message: "hello ann"}); err != nil {
		b.Fatal(err)
	}
	reply := (&hellov1.HelloReply{}).ProtoReflect().Type() // as an interceptor finds it: by the method's descriptor
	floor := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		key, err := proto.Marshal(req.(proto.Message))
		if err != nil {
			return nil, err
		}
		answer, ok := kept[string(key)]
		if !ok {
			return handler(ctx, req)
		}
		out := reply.New().Interface()
		return out, proto.Unmarshal(answer, out)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := floor(d.ctx, req, d.info, d.handler); err != nil {
			b.Fatal(err)
		}
	}
	if runs.Load() != 0 {
		b.Fatalf("handler runs = %d, want 0", runs.Load())
	}
}

func BenchmarkInterceptMiss(b *testing.B) {
	var runs atomic.Int64
	d := newDispatch(&runs)
	// No jitter: the results kept go in the order they came, so none of
	// the 1,000 kept is read again.
	c, _ := newCollapser(b, keepAnHour+"  ttlJitter: 0\n", func(o *Options) { o.Engine.Cache.MaxEntries = 1000 })
	reqs := make([]*hellov1.HelloRequest, 1<<16)
	for i := range reqs {
		reqs[i] = &hellov1.HelloRequest{Name: "ann-" + strconv.Itoa(i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// Each request once within 65,536 calls: with 1,000 entries kept,
		// every call is a miss.
		if _, err := c.serveUnary(d.ctx, reqs[i%len(reqs)], d.info, d.handler); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if runs.Load() != int64(i) {
		b.Fatalf("handler runs = %d, want %d", runs.Load(), i)
	}
}

func BenchmarkInterceptJoin(b *testing.B) {
	c, _ := newCollapser(b, "default:\n  collapse: true\n  cacheTTL: 0s\n", nil)
	joinRounds(b, c.serveUnary, func() int { return c.proxy.Stats().Waiters })
}

// BenchmarkInterceptJoinFloor is the least a join does, as
// BenchmarkInterceptFloor is the least a hit does: InterceptJoin's rounds,
// through the barest group (a mutex, a map, and a channel closed when the
// run ends; x/sync's singleflight would do, but tells nobody who waits,
// which the rounds must know). Each caller encodes its request to find the run by the bytes,
// and decodes its own reply of the answer's; a joiner parks and is woken.
// Nothing else: no header in the key, no policy, no bound, no counter, no
// entry. InterceptJoin's cpu-ns/op over this one's is the engine's own.
func BenchmarkInterceptJoinFloor(b *testing.B) {
	type flight struct {
		done   chan struct{}
		answer []byte
		err    error
	}
	var (
		mu      sync.Mutex
		flights = map[string]*flight{}
		waiting atomic.Int64
	)
	reply := (&hellov1.HelloReply{}).ProtoReflect().Type()
	floor := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		key, err := proto.Marshal(req.(proto.Message))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		f, joined := flights[string(key)]
		if !joined {
			f = &flight{done: make(chan struct{})}
			flights[string(key)] = f
		}
		waiting.Add(1)
		mu.Unlock()
		if joined {
			<-f.done
		} else {
			var out any
			if out, f.err = handler(ctx, req); f.err == nil {
				f.answer, f.err = proto.Marshal(out.(proto.Message))
			}
			mu.Lock()
			delete(flights, string(key))
			mu.Unlock()
			close(f.done)
		}
		waiting.Add(-1)
		if f.err != nil {
			return nil, f.err
		}
		out := reply.New().Interface()
		return out, proto.Unmarshal(f.answer, out)
	}
	joinRounds(b, floor, func() int { return int(waiting.Load()) })
}

// joinRound is how many callers of one request a round of joinRounds makes
// at once: one leads the run, the others join it.
const joinRound = 32

// joinRounds makes b.N calls of one request through intercept, in rounds
// of joinRound callers at once, and reports the process's CPU per call.
// The round's run (its handler) ends only once waiting, what intercept
// reports of the callers that wait for a run, leaders included, counts
// every caller of the round: every other caller has joined it, whatever
// the VM's timers do. A round's callers are woken from a channel, as a
// joiner is woken, so a call's CPU holds two wakes; the floor's
// (InterceptJoinFloor) does too.
func joinRounds(b *testing.B, intercept grpc.UnaryServerInterceptor, waiting func() int) {
	var runs atomic.Int64
	d := newDispatch(&runs)
	// The round's, closed once all wait. A worker reads it after the
	// round's call reached it, and the next round's is made once every
	// call has ended: the channels order both.
	var release chan struct{}
	answer := d.handler
	d.handler = func(ctx context.Context, req any) (any, error) {
		<-release
		return answer(ctx, req)
	}
	req := &hellov1.HelloRequest{Name: "ann"}
	calls := make(chan struct{})
	var ended sync.WaitGroup
	var workers sync.WaitGroup
	for range joinRound {
		workers.Go(func() {
			for range calls {
				if _, err := intercept(d.ctx, req, d.info, d.handler); err != nil {
					b.Error(err)
				}
				ended.Done()
			}
		})
	}
	defer workers.Wait()
	defer close(calls)
	b.ReportAllocs()
	start := testkit.CPUTime(b)
	for done := 0; done < b.N; done += joinRound {
		n := min(joinRound, b.N-done)
		release = make(chan struct{})
		ended.Add(n)
		for range n {
			calls <- struct{}{}
		}
		for waiting() < n && !b.Failed() { // a call that failed waits for nothing
			time.Sleep(100 * time.Microsecond)
		}
		close(release)
		ended.Wait()
		if b.Failed() {
			return
		}
	}
	testkit.ReportCPU(b, start)
	b.ReportMetric(float64(int64(b.N)-runs.Load())/float64(b.N), "joined/op")
}

func BenchmarkLoopbackDirect(b *testing.B) {
	g := answerAsAsked()
	loopback(b, hellov1.NewGreeterClient(dial(b, g.Start(b))), true)
}

func BenchmarkLoopbackLibraryMiss(b *testing.B) {
	g := answerAsAsked()
	// No jitter: the results kept go in the order they came, so none of
	// the 1,000 kept is read again.
	c, _ := newCollapser(b, keepAnHour+"  ttlJitter: 0\n", func(o *Options) { o.Engine.Cache.MaxEntries = 1000 })
	loopback(b, serveGreeter(b, c, g), true)
}

func BenchmarkLoopbackLibraryHit(b *testing.B) {
	g := answerAsAsked()
	c, _ := newCollapser(b, keepAnHour, nil)
	loopback(b, serveGreeter(b, c, g), false)
}

func BenchmarkLoopbackSidecarHit(b *testing.B) {
	g := answerAsAsked()
	c, _, err := tryCollapser(b, keepAnHour, nil, dial(b, g.Start(b)))
	if err != nil {
		b.Fatal(err)
	}
	loopback(b, hellov1.NewGreeterClient(dial(b, serveEngine(b, c))), false)
}

// loopback makes b.N sequential SayHello calls with client, each for a
// name of its own when unique, and reports the process's CPU time per call.
func loopback(b *testing.B, client hellov1.GreeterClient, unique bool) {
	ctx := testkit.Context(b)
	req := &hellov1.HelloRequest{Name: "ann"}
	if _, err := client.SayHello(ctx, req); err != nil { // connect, and keep the answer
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := testkit.CPUTime(b)
	i := 0
	for b.Loop() {
		if unique {
			req = &hellov1.HelloRequest{Name: "ann-" + strconv.Itoa(i)}
			i++
		}
		if _, err := client.SayHello(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	testkit.ReportCPU(b, start)
}
