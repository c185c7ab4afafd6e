package demo

import (
	"context"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// paceTick is how often a steady load hands out the requests that are due.
const paceTick = 10 * time.Millisecond

// sendSteady sends spec's requests at spec.rate per second (an open loop:
// a request is due at its time whatever the latency of those before it),
// spread over spec.concurrency workers, each through one of clients in
// turn. Request i asks for key i modulo spec.keys (Name-<n>), or for its
// own name (distinct), or for spec.name. When every worker is busy, due
// requests wait for one: the load then runs late, and its duration says
// so. It returns each request's result and the load's wall time.
func sendSteady(ctx context.Context, clients []hellov1.GreeterClient, spec burstSpec, p *progress) ([]result, time.Duration) {
	if spec.authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", spec.authorization)
	}
	results := make([]result, spec.requests)
	workers := spec.concurrency
	if workers <= 0 || workers > spec.requests {
		workers = spec.requests
	}
	due := make(chan int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		client := clients[w%len(clients)]
		wg.Go(func() {
			for i := range due {
				results[i] = sayHello(ctx, client, &hellov1.HelloRequest{Name: spec.nameOf(i)}, spec.timeout)
				p.done.Add(1)
			}
		})
	}
	start := time.Now()
	pacer := time.NewTicker(paceTick)
	defer pacer.Stop()
	sent := 0
	for sent < spec.requests && ctx.Err() == nil {
		now := <-pacer.C
		n := min(int(now.Sub(start)*time.Duration(spec.rate)/time.Second), spec.requests)
		for ; sent < n; sent++ {
			p.sent.Add(1)
			due <- sent
		}
	}
	close(due)
	wg.Wait()
	for i := sent; i < spec.requests; i++ { // the caller left first
		results[i] = result{code: status.FromContextError(ctx.Err()).Code()}
	}
	return results, time.Since(start)
}

// nameOf is the name request i of the load asks for.
func (s burstSpec) nameOf(i int) string {
	switch {
	case s.keys > 0:
		return s.name + "-" + strconv.Itoa(i%s.keys)
	case s.distinct:
		return s.name + "-" + strconv.Itoa(i)
	}
	return s.name
}
