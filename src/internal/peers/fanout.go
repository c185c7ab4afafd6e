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

	"google.golang.org/grpc"
)

// Fanout reaches every replica of a peer target, not one owner: a purge
// must reach each replica, as each may keep copies of an answer. It finds
// the replicas when it is asked to reach them (the headless Service's
// addresses, or the fixed list), so a replica that joined is reached at
// once, and keeps one connection per replica, closed when the replica is
// gone.
type Fanout struct {
	host, port string   // of a dns:/// target; host "" for a fixed list
	fixed      []string // the fixed list's addresses
	resolver   *net.Resolver

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address
}

// NewFanout returns a Fanout to the replicas of target, in the form Dial
// takes; of the schemes only dns:/// names every replica.
func NewFanout(target string) (*Fanout, error) {
	f := &Fanout{resolver: net.DefaultResolver, conns: map[string]*grpc.ClientConn{}}
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

// Replicas returns the address of every replica now.
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
	return addrs, nil
}

// Each runs call on every replica at once, and returns each failure,
// naming its replica.
func (f *Fanout) Each(ctx context.Context, call func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	addrs, err := f.Replicas(ctx)
	if err != nil {
		return err
	}
	conns, err := f.connect(addrs)
	if err != nil {
		return err
	}
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, cc := range conns {
		wg.Go(func() {
			if err := call(ctx, cc); err != nil {
				errs[i] = fmt.Errorf("replica %s: %w", addrs[i], err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// connect returns a connection to each of addrs, in order, and closes
// those to replicas no longer among them.
func (f *Fanout) connect(addrs []string) ([]*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	conns := make([]*grpc.ClientConn, len(addrs))
	for i, addr := range addrs {
		cc, ok := f.conns[addr]
		if !ok {
			var err error
			// passthrough: the address is a replica's, resolved already.
			if cc, err = grpc.NewClient("passthrough:///"+addr, connOptions()...); err != nil {
				return nil, fmt.Errorf("replica %s: %w", addr, err)
			}
			f.conns[addr] = cc
		}
		conns[i] = cc
	}
	for addr, cc := range f.conns {
		if !slices.Contains(addrs, addr) {
			cc.Close()
			delete(f.conns, addr)
		}
	}
	return conns, nil
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
