package collapse

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// workerIdle is how long a worker goroutine waits for another call before it
// exits. Reusing workers keeps goroutine start-up and its allocation off the
// leader's path under steady load.
const workerIdle = 5 * time.Second

// ErrGoexit is the error waiters get when the call ran runtime.Goexit.
var ErrGoexit = errors.New("collapse: call exited through runtime.Goexit")

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

// start hands e to an idle worker, or starts a new one.
func (g *Group[V]) start(e *entry[V]) {
	select {
	case g.handoff <- e:
	default:
		go g.work(e)
	}
}

// work runs e's call, then further calls handed to it, until it has been
// idle for workerIdle or the Group is closed.
func (g *Group[V]) work(e *entry[V]) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		g.run(e)
		idle.Reset(workerIdle)
		select {
		case e = <-g.handoff:
		case <-idle.C:
			return
		case <-g.closed:
			return
		}
	}
}

// run calls e.fn and completes e whatever happens: a return, a panic (which
// is recovered, so the worker and the process survive) or runtime.Goexit
// (which ends the worker after e is completed).
func (g *Group[V]) run(e *entry[V]) {
	returned := false
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				e.err = &PanicError{Value: r, Stack: debug.Stack()}
			} else {
				e.err = ErrGoexit
			}
		}
		g.complete(e)
	}()
	e.val, e.err = e.fn()
	returned = true
}
