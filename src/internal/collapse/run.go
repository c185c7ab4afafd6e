package collapse

import (
	"context"
	"errors"
	"fmt"
)

// run makes e's call once it holds a slot, and completes e whatever happens:
// a return, no slot in time, a panic (recovered: the goroutine and the
// process survive) or runtime.Goexit (which then goes on ending the
// goroutine, as it asked).
func (g *Group[V]) run(e *entry[V]) {
	holding := e.background // a refresh took its slot when it was started
	returned := false
	defer func() {
		if holding {
			g.release()
		}
		if !returned {
			e.err = ErrGoexit
			g.complete(e)
		}
	}()
	if !holding {
		if err := g.acquireFor(e); err != nil {
			e.call.finish()
			e.err = err
			returned = true
			g.complete(e)
			return
		}
		holding = true
	}
	e.running.Store(true)
	e.val, e.err = protect(&e.call, e.fn)
	returned = true
	g.release()
	holding = false
	g.complete(e)
}

// acquireFor takes a slot for e's call, waiting while its context lasts
// (made only when the call has to wait).
func (g *Group[V]) acquireFor(e *entry[V]) error {
	if g.trySlot() {
		return nil
	}
	err := g.queue(e.call.Context())
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no slot free within the call's timeout of %v", ErrOverloaded, e.opts.Timeout)
	}
	return err
}

// acquire takes a slot for a caller's own call, waiting while ctx lasts.
func (g *Group[V]) acquire(ctx context.Context) error {
	if g.trySlot() {
		return nil
	}
	return g.queue(ctx)
}

// queue waits for a slot while ctx lasts, counted as queued meanwhile.
// Only a Group that bounds its calls makes a call wait.
func (g *Group[V]) queue(ctx context.Context) error {
	g.queued.Add(1)
	defer g.queued.Add(-1)
	return g.slots.Acquire(ctx, 1)
}

// trySlot takes a slot if one is free now.
func (g *Group[V]) trySlot() bool {
	return g.slots == nil || g.slots.TryAcquire(1)
}

// release gives back a slot taken by acquireFor, acquire or trySlot.
func (g *Group[V]) release() {
	if g.slots != nil {
		g.slots.Release(1)
	}
}
