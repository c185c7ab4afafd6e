package collapse

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// ErrGoexit is the error waiters get when the call ran runtime.Goexit.
var ErrGoexit = errors.New("collapse: call exited through runtime.Goexit")

// ErrOverloaded is the error of a call that found no slot (Options.MaxCalls)
// before its timeout.
var ErrOverloaded = errors.New("collapse: too many calls in flight")

// PanicError is the error waiters get when the call panicked.
type PanicError struct {
	// Value is what the call panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error reports the panic value; the stack is kept for logs.
func (p *PanicError) Error() string {
	return fmt.Sprintf("collapse: call panicked: %v", p.Value)
}

// Call is what a call's function is given: the context the call must run
// under. A Call is valid until the function returns.
type Call struct {
	parent  context.Context // context.Background for shared calls
	timeout time.Duration
	own     bool // a caller's own call, not shared: see Own
	refresh bool // replaces a result the Group holds: see Refresh
	// background says why nobody waits for the call; set before it starts.
	background Background
	// leader is the context of the caller whose goroutine runs the call, and
	// leaver is told when it ends first; nil for calls no caller runs.
	leader context.Context
	leaver interface{ leave() }

	mu       sync.Mutex
	ctx      context.Context    // made on first use: a call that never asks for it costs nothing
	cancel   context.CancelFunc // of ctx
	stop     func() bool        // stops watching leader
	canceled bool               // abort was called: a ctx not made yet is never made
}

// Context returns the call's context. A shared call's context belongs to no
// caller: it ends when the call's timeout passes, or when every caller
// waiting for it has left (unless CallOptions.Finish keeps it running).
func (c *Call) Context() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		if c.canceled { // aborted before it asked, or over
			return ended
		}
		if c.timeout > 0 {
			c.ctx, c.cancel = context.WithTimeout(c.parent, c.timeout)
		} else {
			c.ctx, c.cancel = context.WithCancel(c.parent)
		}
		if c.leader != nil {
			// Only a call that can be cancelled needs to know when its
			// leader leaves.
			c.stop = context.AfterFunc(c.leader, c.leaver.leave)
		}
	}
	return c.ctx
}

// ended is what Context returns for a call aborted before its context was
// made, or over: a cancelled context.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Own reports whether the call is one caller's own, not shared: the call
// it joined produced a private value (Options.Private), or it did not wait
// for it (CallOptions.MaxWaiters, WaitTimeout).
func (c *Call) Own() bool {
	return c.own
}

// Refresh reports whether the call replaces a result the Group holds, past
// its TTL or purged: a call that asks another cache for the answer asks it
// for a fresh one (Copy.Fresh), since the stale one is here already.
func (c *Call) Refresh() bool {
	return c.refresh
}

// Background says why a call nobody waits for was started.
type Background uint8

const (
	// Foreground: a caller waits for the call.
	Foreground Background = iota
	// Revalidate: a result past its TTL is served stale meanwhile
	// (CallOptions.StaleWhileRevalidate).
	Revalidate
	// Early: a fresh result still read is refreshed before its TTL ends
	// (CallOptions.EarlyRefresh).
	Early
	// Purged: a result a soft purge took back is refreshed in its turn
	// (Options.SoftPurgeRate), served stale meanwhile.
	Purged
)

// Background reports why nobody waits for the call: Foreground when a
// caller does.
func (c *Call) Background() Background {
	return c.background
}

// abort cancels the call's context, now or when it is made.
func (c *Call) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.cancel != nil {
		c.cancel()
	}
}

// finish ends the call: its context is cancelled, which releases its timer,
// and the leader is no longer watched. It then lets go of everything the
// call was made with (the leader's context, the watch, its own context), so
// that an entry that outlives its call, as a held result does, keeps
// nothing of the stream that led it.
func (c *Call) finish() {
	c.abort()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		c.stop()
	}
	c.leader, c.leaver, c.stop = nil, nil, nil
	c.ctx, c.cancel = nil, nil
}

// protect runs fn with c and turns a panic into a *PanicError; a
// runtime.Goexit in fn is not stopped (callers give their slot back, and a
// shared call completes, in a defer). The call's context is released when
// fn ends, however it ends.
func protect[V any](c *Call, fn func(*Call) (V, error)) (v V, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
		c.finish()
	}()
	return fn(c)
}
