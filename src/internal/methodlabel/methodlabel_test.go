package methodlabel

import (
	"fmt"
	"sync"
	"testing"
)

func TestSet_AdmitsFirstMaxThenReportsOther(t *testing.T) {
	l := New(2)
	steps := []struct{ method, want string }{
		{"/a.S/One", "/a.S/One"},
		{"/a.S/Two", "/a.S/Two"},
		{"/a.S/Three", Other},
		{"/a.S/One", "/a.S/One"},
		{"/a.S/Two", "/a.S/Two"},
		{"/a.S/Four", Other},
	}
	for _, s := range steps {
		if got := l.Label(s.method); got != s.want {
			t.Errorf("label(%q) = %q, want %q", s.method, got, s.want)
		}
	}
}

func TestSet_ConcurrentCallersNeverAdmitMoreThanMax(t *testing.T) {
	const limit, goroutines, perGoroutine = 10, 8, 50
	l := New(limit)
	var mu sync.Mutex
	admitted := map[string]bool{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				m := fmt.Sprintf("/s.S/M%d", (g*perGoroutine+i)%(3*limit))
				if got := l.Label(m); got != Other {
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
		if got := l.Label(m); got != m {
			t.Errorf("admitted method %q later labelled %q", m, got)
		}
	}
}
