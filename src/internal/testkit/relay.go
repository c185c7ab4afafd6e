package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay in front of a listener, as the network between two
// pods is: a test cuts it to make the listener unreachable while its server
// runs on (a partition, not a crash: connections hang, nothing is
// refused), and heals it. As an on-path attacker would, it keeps every
// byte it carried, and can alter what the target answers. Safe for
// concurrent use.
type Relay struct {
	lis    net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]bool // both ends of every relayed connection
	carried []byte            // the first maxCarried bytes relayed, both ways
	alter   func([]byte)      // applied to the target's bytes; nil: none
}

// NewRelay relays connections to target from a listener on 127.0.0.1:0
// until the test ends.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	r := &Relay{lis: Listen(t, "127.0.0.1:0"), target: target, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := r.lis.Accept()
			if err != nil {
				return
			}
			go r.relay(c)
		}
	}()
	t.Cleanup(func() {
		r.lis.Close()
		<-done
		r.closeAll()
	})
	return r
}

// Addr returns the relay's address.
func (r *Relay) Addr() string { return r.lis.Addr().String() }

// Cut makes the target unreachable through the relay: the connections it
// relays stop carrying bytes, and new ones are accepted but go nowhere.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
}

// Heal ends a cut: the connections that hung are closed (their clients
// connect again) and new ones are relayed.
func (r *Relay) Heal() {
	r.closeAll()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}

// relay connects c to the target and copies both ways until either ends,
// or holds it while the relay is cut.
func (r *Relay) relay(c net.Conn) {
	r.mu.Lock()
	r.conns[c] = true
	cut := r.cut
	r.mu.Unlock()
	if cut {
		return // held open, carrying nothing, until Heal or the end
	}
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns[up] = true
	r.mu.Unlock()
	go r.copy(up, c, false)
	r.copy(c, up, true)
}

// maxCarried bounds the bytes a relay keeps of what it carried.
const maxCarried = 8 << 20

// Carried returns a copy of the bytes the relay carried, both ways: the
// first 8 MiB.
func (r *Relay) Carried() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.carried...)
}

// Alter applies f to every read of the target's bytes before they are
// relayed on (nil: relay them as they are).
func (r *Relay) Alter(f func([]byte)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alter = f
}

// copy copies from src to dst while the relay is not cut; a cut stops it
// without closing either end. fromTarget: src is the target's end.
func (r *Relay) copy(dst, src net.Conn, fromTarget bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		cut := r.cut
		if n > 0 && !cut {
			if len(r.carried) < maxCarried {
				r.carried = append(r.carried, buf[:min(n, maxCarried-len(r.carried))]...)
			}
			if fromTarget && r.alter != nil {
				r.alter(buf[:n])
			}
		}
		r.mu.Unlock()
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			} else if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// closeAll closes every connection the relay holds.
func (r *Relay) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}
