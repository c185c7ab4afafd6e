package logonce_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/logonce"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type step struct {
	key         string
	first, full bool
}

func TestSet_FirstWithinItsBounds(t *testing.T) {
	tests := []struct {
		name              string
		maxKeys, maxBytes int
		steps             []step
	}{
		{"a key is first once", 10, 100, []step{{"a", true, false}, {"a", false, false}, {"b", true, false}}},
		{"the key bound says full once", 2, 100, []step{
			{"a", true, false}, {"b", true, false}, {"c", false, true}, {"d", false, false},
			{"a", false, false}, // a key remembered before the bound stays remembered
		}},
		{"the byte bound counts key bytes", 10, 5, []step{{"abc", true, false}, {"de", true, false}, {"f", false, true}, {"g", false, false}}},
		{"a set without room remembers nothing", 0, 0, []step{{"a", false, true}, {"a", false, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := logonce.New(tt.maxKeys, tt.maxBytes)
			for i, st := range tt.steps {
				if first, full := s.First(st.key); first != st.first || full != st.full {
					t.Errorf("step %d First(%q) = %v, %v; want %v, %v", i, st.key, first, full, st.first, st.full)
				}
			}
		})
	}
}

func TestSet_FirstIsFirstForOneCallerOnly(t *testing.T) {
	s := logonce.New(10, 100)
	var firsts atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if first, _ := s.First("/pkg.Service/Method"); first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if got := firsts.Load(); got != 1 {
		t.Errorf("%d concurrent callers were told first, want 1", got)
	}
}

func TestShort(t *testing.T) {
	whole := strings.Repeat("m", logonce.MaxValueBytes)
	if got := logonce.Short(whole); got != whole {
		t.Errorf("Short(%d bytes) = %q, want it whole", len(whole), got)
	}
	long := whole + "tail"
	if got, want := logonce.Short(long), whole+"…(132 bytes)"; got != want {
		t.Errorf("Short(%d bytes) = %q, want %q", len(long), got, want)
	}
}
