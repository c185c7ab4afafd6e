package collapse

import (
	"context"
	"errors"
	"fmt"
)

// slotFor takes a slot for e's call (slot) and reports whether it holds
// one; when none is free in time, it completes e with that error.
func (g *Group[V]) slotFor(e *entry[V]) bool {
	err := g.slot(&e.call)
	if err == nil {
		return true
	}
	e.call.finish()
	e.err = err
	g.complete(e)
	return false
}

// call makes e's call, which holds a slot (a refresh takes its own when it
// is started), then gives the slot back and completes e, however the call
// ends: a return, a panic (recovered by protect into a *PanicError: the
// goroutine and the process survive) or runtime.Goexit (which then goes on
// ending the goroutine, as it asked).
func (g *Group[V]) call(e *entry[V]) {
	e.running.Store(true)
	returned := false
	defer func() {
		if !returned {
			e.err = ErrGoexit
		}
		g.release()
		g.complete(e)
	}()
	e.val, e.err = protect(&e.call, e.fn)
	returned = true
}

// slot takes a slot for c, waiting while c's context lasts (made only when
// the call has to wait): within the call's timeout, and, for a caller's own
// call, while the caller waits.
func (g *Group[V]) slot(c *Call) error {
	if g.trySlot() {
		return nil
	}
	err := g.queue(c.Context())
	if errors.Is(err, context.DeadlineExceeded) && c.parent.Err() == nil {
		return fmt.Errorf("%w: no slot free within the call's timeout of %v", ErrOverloaded, c.timeout)
	}
	return err
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

// release gives back a slot taken by slot or trySlot.
func (g *Group[V]) release() {
	if g.slots != nil {
		g.slots.Release(1)
	}
}
