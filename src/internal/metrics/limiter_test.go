package metrics

import (
	"fmt"
	"sync"
	"testing"
)

func TestMethodLimiter_AdmitsFirstMaxThenReportsOther(t *testing.T) {
	l := newMethodLimiter(2)
	steps := []struct{ method, want string }{
		{"/a.S/One", "/a.S/One"},
		{"/a.S/Two", "/a.S/Two"},
		{"/a.S/Three", OtherMethod},
		{"/a.S/One", "/a.S/One"},
		{"/a.S/Two", "/a.S/Two"},
		{"/a.S/Four", OtherMethod},
	}
	for _, s := range steps {
		if got := l.label(s.method); got != s.want {
			t.Errorf("label(%q) = %q, want %q", s.method, got, s.want)
		}
	}
}

func TestMethodLimiter_ConcurrentCallersNeverAdmitMoreThanMax(t *testing.T) {
	const limit, goroutines, perGoroutine = 10, 8, 50
	l := newMethodLimiter(limit)
	var mu sync.Mutex
	admitted := map[string]bool{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				m := fmt.Sprintf("/s.S/M%d", (g*perGoroutine+i)%(3*limit))
				if got := l.label(m); got != OtherMethod {
					mu.Lock()
					admitted[got] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(admitted) != limit {
		t.Errorf("admitted %d distinct methods, want exactly %d", len(admitted), limit)
	}
	for m := range admitted {
		if got := l.label(m); got != m {
			t.Errorf("admitted method %q later labelled %q", m, got)
		}
	}
}
