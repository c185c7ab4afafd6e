package demo

import (
	"fmt"
	"io"
	"time"
)

// startProgress writes a progress line to w every interval (0 = 1s) until the
// returned stop is called, which writes a final line; w == nil = silent.
func startProgress(w io.Writer, interval time.Duration, p *progress) (stop func()) {
	if w == nil {
		return func() {}
	}
	if interval <= 0 {
		interval = defaultProgressInterval
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.write(w)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		p.write(w)
	}
}

// write writes one progress line; a failed write only loses progress output.
func (p *progress) write(w io.Writer) {
	_, _ = fmt.Fprintf(w, "sent %d/%d, done %d/%d\n", p.sent.Load(), p.total.Load(), p.done.Load(), p.total.Load())
}
