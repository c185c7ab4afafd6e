package forwarding

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sayHello = "/hello.v1.Greeter/SayHello"

// observe counts n forwarded calls of sayHello, shared of them shared, then
// moves the clock one window on and counts one more, unshared, which
// closes the window.
func observe(d *Decider, c *testkit.Clock, n, shared int) {
	for i := range n {
		d.Observe(sayHello, i < shared)
	}
	c.Advance(Window)
	d.Observe(sayHello, false)
}

// unsampled and sampled are hashes outside and inside the sample.
func hashes(t *testing.T) (unsampled, sampled string) {
	t.Helper()
	for i := 0; unsampled == "" || sampled == ""; i++ {
		h := fmt.Sprint(i)
		if xxhash.Sum64String(h)%SampleOneIn == 0 {
			sampled = h
		} else {
			unsampled = h
		}
	}
	return unsampled, sampled
}

func TestDecider(t *testing.T) {
	unsampled, sampled := hashes(t)
	tests := []struct {
		name          string
		calls, shared int
		want          bool
	}{
		{"a method starts forwarded", 0, 0, true},
		{"too few calls keep the decision", MinCalls - 2, 0, true},
		{"calls that never share are not forwarded", 100, 0, false},
		{"below one in twenty is not enough", 199, 9, false},
		{"one in twenty shared pays", 199, 10, true},
		{"every call shared", 100, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testkit.NewClock(time.Unix(0, 0))
			d := New(c.Now)
			if tt.calls > 0 {
				observe(d, c, tt.calls, tt.shared)
			}
			if got := d.Forward(sayHello, unsampled); got != tt.want {
				t.Errorf("Forward(unsampled key) = %v, want %v", got, tt.want)
			}
			if !d.Forward(sayHello, sampled) {
				t.Error("a sampled key is not forwarded, want every sampled key forwarded")
			}
			if tt.calls > 0 {
				if got := d.Forwarded()[sayHello]; got != tt.want {
					t.Errorf("Forwarded()[sayHello] = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestDecider_SharingThatComesBackForwardsAgain(t *testing.T) {
	unsampled, _ := hashes(t)
	c := testkit.NewClock(time.Unix(0, 0))
	d := New(c.Now)
	observe(d, c, 100, 0)
	if d.Forward(sayHello, unsampled) {
		t.Fatal("calls that never share are forwarded")
	}
	// The sample's calls share now: the halved old counts weigh less.
	observe(d, c, 60, 30)
	if !d.Forward(sayHello, unsampled) {
		t.Error("a method whose sampled calls share again is not forwarded")
	}
}

func TestDecider_CountsAtMostMaxMethods(t *testing.T) {
	unsampled, _ := hashes(t)
	c := testkit.NewClock(time.Unix(0, 0))
	d := New(c.Now)
	for i := range MaxMethods + 10 {
		d.Observe(fmt.Sprint("/m/", i), false)
	}
	if n := len(d.Forwarded()); n != MaxMethods {
		t.Errorf("methods counted = %d, want %d", n, MaxMethods)
	}
	last := fmt.Sprint("/m/", MaxMethods+5)
	for range 2 * MinCalls {
		d.Observe(last, false)
	}
	c.Advance(Window)
	d.Observe(last, false)
	if !d.Forward(last, unsampled) {
		t.Error("a method past MaxMethods is not forwarded, want it forwarded as an unknown one")
	}
}

func TestDecider_ConcurrentUse(t *testing.T) {
	c := testkit.NewClock(time.Unix(0, 0))
	d := New(c.Now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m := fmt.Sprint("/m/", (g+i)%5)
				d.Observe(m, i%3 == 0)
				d.Forward(m, fmt.Sprint(i))
				if i%100 == 0 {
					c.Advance(Window)
					d.Forwarded()
				}
			}
		})
	}
	wg.Wait()
}

func TestDecider_AKeySharedHereIsForwardedThoughItsMethodIsNot(t *testing.T) {
	unsampled, _ := hashes(t)
	other := unsampled + "-other"
	c := testkit.NewClock(time.Unix(0, 0))
	d := New(c.Now)
	d.Shared(sayHello, unsampled) // a forwarded method's keys need no memory
	observe(d, c, 100, 0)
	if d.Forward(sayHello, unsampled) {
		t.Fatal("a method whose calls never share is forwarded")
	}
	// A call of the key was shared on this replica: the key is hot.
	d.Shared(sayHello, unsampled)
	if !d.Forward(sayHello, unsampled) {
		t.Error("a key shared here is not forwarded")
	}
	if d.Forward(sayHello, other) {
		t.Error("another key of the method is forwarded")
	}
	c.Advance(HotFor)
	if !d.Forward(sayHello, unsampled) {
		t.Error("the key is not forwarded one HotFor later, want it hot for at least HotFor")
	}
	c.Advance(HotFor)
	if d.Forward(sayHello, unsampled) {
		t.Error("the key is forwarded two HotFor later, want it forgotten")
	}
}

func TestDecider_RemembersAtMostMaxHotKeys(t *testing.T) {
	c := testkit.NewClock(time.Unix(0, 0))
	d := New(c.Now)
	observe(d, c, 100, 0)
	var unsampled []string
	for i := 0; len(unsampled) < MaxHotKeys+10; i++ {
		if h := fmt.Sprint(i); xxhash.Sum64String(h)%SampleOneIn != 0 {
			unsampled = append(unsampled, h)
		}
	}
	for _, h := range unsampled {
		d.Shared(sayHello, h)
	}
	forwarded := 0
	for _, h := range unsampled {
		if d.Forward(sayHello, h) {
			forwarded++
		}
	}
	if forwarded != MaxHotKeys {
		t.Errorf("hot keys forwarded = %d, want MaxHotKeys %d", forwarded, MaxHotKeys)
	}
}
