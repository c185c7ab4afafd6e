package demo

import (
	"context"
	"net"
	"sync"
	"time"
)

// tallyInterval is how often a tally reads every backend's count.
const tallyInterval = time.Second

// tally counts a method's backend calls over a load during which backends
// come and go (a rolling restart replaces every pod): a count summed over
// the backends of the moment, read before and after, would lose the calls
// of every backend that left and count those of every one that came before
// the load. It reads each backend's own count every tallyInterval, and
// adds up, per backend address, what its count rose by since the load
// began: from its first reading for a backend there when it began, from 0
// for one that came later (all its calls were made during the load). A
// backend that is gone keeps its last reading; one whose count fell
// restarted at its address, and counts from 0 again. What a backend that
// left served after its last reading is lost: at most tallyInterval of it.
type tally struct {
	// backends returns the backends' addresses now; countAt reads the
	// count of the backend at addr.
	backends func(ctx context.Context) ([]string, error)
	countAt  func(ctx context.Context, addr string) (int64, error)

	readings map[string]*reading // by address
	restarts int64               // calls of backends that restarted at their address
}

// reading is what a tally last read of one backend.
type reading struct{ base, last int64 }

// newTally tallies method's calls at the backends of c's URL, whose host
// may name several (a headless Service names every pod).
func newTally(ctx context.Context, c metricsCounter, method string) (*tally, error) {
	return startTally(ctx,
		func(ctx context.Context) ([]string, error) {
			addrs, err := backendAddresses(ctx, c.url.Hostname())
			if err != nil {
				return nil, c.readError(method, err)
			}
			return addrs, nil
		},
		func(ctx context.Context, addr string) (int64, error) { return c.countAt(ctx, c.at(addr), method) })
}

// startTally reads every backend's count now, as the load's start: it
// fails when any cannot be read.
func startTally(ctx context.Context, backends func(context.Context) ([]string, error), countAt func(context.Context, string) (int64, error)) (*tally, error) {
	t := &tally{backends: backends, countAt: countAt, readings: map[string]*reading{}}
	addrs, err := backends(ctx)
	if err != nil {
		return nil, err
	}
	for _, addr := range addrs {
		n, err := countAt(ctx, addr)
		if err != nil {
			return nil, err
		}
		t.readings[addr] = &reading{base: n, last: n}
	}
	return t, nil
}

// read reads every backend there is now; a backend that cannot be read
// (it is leaving, or not serving yet) is read next time.
func (t *tally) read(ctx context.Context) {
	addrs, err := t.backends(ctx)
	if err != nil {
		return
	}
	for _, addr := range addrs {
		n, err := t.countAt(ctx, addr)
		if err != nil {
			continue
		}
		r := t.readings[addr]
		switch {
		case r == nil:
			t.readings[addr] = &reading{last: n}
		case n < r.last:
			t.restarts += r.last - r.base
			*r = reading{last: n}
		default:
			r.last = n
		}
	}
}

// during reads the counts every tallyInterval while run runs, then once
// more, and returns the calls counted.
func (t *tally) during(ctx context.Context, run func()) int64 {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(tallyInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				t.read(ctx)
			}
		}
	})
	run()
	close(done)
	wg.Wait()
	t.read(ctx)
	return t.total()
}

// total is the calls counted so far.
func (t *tally) total() int64 {
	n := t.restarts
	for _, r := range t.readings {
		n += r.last - r.base
	}
	return n
}

// at is the URL of the backend at addr.
func (c metricsCounter) at(addr string) string {
	u := *c.url
	u.Host = net.JoinHostPort(addr, c.url.Port())
	return u.String()
}
