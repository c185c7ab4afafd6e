package peers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/grpc"
)

// Fanout reaches every replica of a peer target, not one owner: a purge
// must reach each replica, as each may keep copies of an answer. It finds
// the replicas when it is asked to reach them (the headless Service's
// addresses, or the fixed list), so a replica that joined is reached at
// once, and keeps one connection per replica, closed when the replica is
// gone. It tells a replica that is gone (nothing listens at its address,
// or no host has it) from one it cannot reach.
type Fanout struct {
	host, port string   // of a dns:/// target; host "" for a fixed list
	fixed      []string // the fixed list's addresses
	resolver   *net.Resolver
	isSelf     func(addr string) bool
	extra      []grpc.DialOption // besides connOptions: the peers' credentials

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address
	gone  map[string]bool             // by address: its last dial was refused, or found no host
}

// NewFanout returns a Fanout to the replicas of target, in the form Dial
// takes; of the schemes only dns:/// names every replica. listen is this
// replica's own peer listener, by which it knows itself among them (Self);
// extra are options of every connection besides its own (Trust.DialOptions).
func NewFanout(target, listen string, extra ...grpc.DialOption) (*Fanout, error) {
	isSelf, err := selfAddress(listen)
	if err != nil {
		return nil, err
	}
	f := &Fanout{resolver: net.DefaultResolver, isSelf: isSelf, extra: extra, conns: map[string]*grpc.ClientConn{}, gone: map[string]bool{}}
	if !strings.Contains(target, "://") {
		eps, err := parseList(target)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			f.fixed = append(f.fixed, ep.Addresses[0].Addr)
		}
		return f, nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "dns" || u.Host != "" {
		return nil, fmt.Errorf("peers %s: to reach every replica the target must be dns:///name:port or a list of host:port", target)
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u.Path, "/"))
	if err != nil || host == "" {
		return nil, fmt.Errorf("peers %s: want dns:///name:port: %v", target, err)
	}
	f.host, f.port = host, port
	return f, nil
}

// Replicas returns the address of every replica now, this one included,
// and closes the connections to replicas no longer among them.
func (f *Fanout) Replicas(ctx context.Context) ([]string, error) {
	if f.host == "" {
		return f.fixed, nil
	}
	ips, err := f.resolver.LookupHost(ctx, f.host)
	if err != nil {
		return nil, fmt.Errorf("find the replicas %s: %w", f.host, err)
	}
	addrs := make([]string, len(ips))
	for i, ip := range ips {
		addrs[i] = net.JoinHostPort(ip, f.port)
	}
	slices.Sort(addrs)
	f.forget(addrs)
	return addrs, nil
}

// Self reports whether addr, one of the replicas, is this one.
func (f *Fanout) Self(addr string) bool { return f.isSelf(addr) }

// Each runs call on every replica but this one at once, with its address,
// and returns each failure, naming its replica.
func (f *Fanout) Each(ctx context.Context, call func(ctx context.Context, addr string, cc grpc.ClientConnInterface) error) error {
	addrs, err := f.Replicas(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		if f.isSelf(addr) {
			continue
		}
		wg.Go(func() {
			cc, err := f.Conn(addr)
			if err == nil {
				err = call(ctx, addr, cc)
			}
			if err != nil {
				errs[i] = fmt.Errorf("replica %s: %w", addr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Conn returns the connection to the replica at addr, made on first use.
func (f *Fanout) Conn(addr string) (grpc.ClientConnInterface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cc, ok := f.conns[addr]; ok {
		return cc, nil
	}
	// passthrough: the address is a replica's, resolved already.
	cc, err := grpc.NewClient("passthrough:///"+addr, append(append(connOptions(), grpc.WithContextDialer(f.dial)), f.extra...)...)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", addr, err)
	}
	f.conns[addr] = cc
	return cc, nil
}

// dial connects to a replica, and remembers whether it is gone.
func (f *Fanout) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone[addr] = errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH)
	return conn, err
}

// Gone reports whether the replica at addr is gone: the last attempt to
// connect to it was refused (nothing listens there any more) or found no
// host (the address is nobody's). One that does not answer is not gone: it
// may be running, cut off.
func (f *Fanout) Gone(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[addr]
}

// forget closes the connections to replicas not among addrs.
func (f *Fanout) forget(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, cc := range f.conns {
		if !slices.Contains(addrs, addr) {
			cc.Close()
			delete(f.conns, addr)
			delete(f.gone, addr)
		}
	}
}

// Close closes every connection.
func (f *Fanout) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for addr, cc := range f.conns {
		errs = append(errs, cc.Close())
		delete(f.conns, addr)
	}
	return errors.Join(errs...)
}
