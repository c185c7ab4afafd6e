package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

// The targets, in the order of every round.
const (
	targetDirect    = "direct"
	targetCollapser = "collapser"
	// targetPeers is a scenario's Peers collapsers, peered with each other
	// and called through the first.
	targetPeers = "collapser-peers"
	targetNginx = "nginx"
	targetPlain = "plain"
)

// targetNames are the targets in the order of every round.
var targetNames = []string{targetDirect, targetCollapser, targetPeers, targetNginx, targetPlain}

// target is where a run sends its calls.
type target struct {
	name string
	addr string
	// proxies are the processes a call through the target costs CPU in,
	// the one called first; none for direct.
	proxies []*process
}

// stack is one scenario's servers on loopback: the hello backend and the
// proxies in front of it.
type stack struct {
	backend    *process
	counts     *client    // of the backend, for its own SayHello count
	clientCPUs string     // where ghz runs against this stack
	targets    []target   // direct first
	procs      []*process // every process started, in order
}

// startStack starts the backend and the proxies for sc on free ports, all
// pinned to the scenario's server CPUs, and returns once a call through each
// target has succeeded and every collapser follows the scenario's rule for
// SayHello (and, peered, reaches its peers).
func startStack(ctx context.Context, cfg config, sc scenario) (st *stack, err error) {
	ports, err := freePorts(portsOf(sc))
	if err != nil {
		return nil, err
	}
	clientCPUs, serverCPUs := cfg.cpus(sc)
	st = &stack{clientCPUs: clientCPUs}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.stop())
		}
	}()
	l := &launcher{cfg: cfg, sc: sc, cpus: serverCPUs, ports: ports, st: st}

	backendAddr, err := l.startBackend(ctx)
	if err != nil {
		return st, err
	}
	st.targets = append(st.targets, target{name: targetDirect, addr: backendAddr})
	steps := []func(context.Context, string) (target, error){l.startLoneCollapser}
	if sc.Peers > 0 {
		steps = append(steps, l.startPeers)
	}
	if !sc.CollapserOnly {
		steps = append(steps, l.startNginx, l.startPlain)
	}
	for _, step := range steps {
		t, err := step(ctx, backendAddr)
		if err != nil {
			return st, err
		}
		st.targets = append(st.targets, t)
	}
	return st, nil
}

// portsOf returns how many ports sc's stack listens on: the backend's gRPC
// and metrics ports, a collapser's gRPC, metrics and admin ports, each
// peer's as many and its peer port, nginx's and the plain proxy's.
func portsOf(sc scenario) int {
	return 2 + 3 + 4*sc.Peers + 2
}

// launcher starts the processes of one scenario's stack, pinned to the
// scenario's server CPUs, on ports reserved together, and records them in st.
type launcher struct {
	cfg   config
	sc    scenario
	cpus  string // taskset list of the servers; "" = not pinned
	ports []int  // reserved and not yet handed out
	st    *stack
}

// addr returns a loopback address on the next reserved port.
func (l *launcher) addr() string {
	if len(l.ports) == 0 {
		panic("benchpeers: portsOf counts fewer ports than the stack listens on")
	}
	port := l.ports[0]
	l.ports = l.ports[1:]
	return "127.0.0.1:" + strconv.Itoa(port)
}

// start starts argv as the process name (prefixed with the scenario's id)
// and records it in the stack.
func (l *launcher) start(name string, env []string, argv ...string) (*process, error) {
	p, err := startProcess(l.cfg.workdir, l.sc.ID+"-"+name, l.cpus, env, argv...)
	if p != nil {
		l.st.procs = append(l.st.procs, p)
	}
	return p, err
}

// startBackend starts the hello backend with the scenario's latency and
// returns its address once it answers the harness's count.
func (l *launcher) startBackend(ctx context.Context) (string, error) {
	addr := l.addr()
	backend, err := l.start("hello-backend", nil, filepath.Join(l.cfg.bin, "hello-backend"),
		"--listen", addr, "--metrics-listen", l.addr(), "--latency", l.sc.Latency.String())
	if err != nil {
		return "", err
	}
	l.st.backend = backend
	if l.st.counts, err = dial(addr); err != nil {
		return "", err
	}
	return addr, waitFor(ctx, backend, func(ctx context.Context) error {
		_, err := l.st.counts.sayHelloCalls(ctx)
		return err
	})
}

// startNginx starts nginx's grpc_pass in front of backend, with one worker
// per server CPU.
func (l *launcher) startNginx(ctx context.Context, backend string) (target, error) {
	addr := l.addr()
	workers, _ := countCPUs(l.cpus) // checked by parseConfig
	dir := filepath.Join(l.cfg.workdir, l.sc.ID+"-nginx")
	conf, err := writeNginxConf(dir, addr, backend, workers, l.cfg.burst.requests)
	if err != nil {
		return target{}, err
	}
	nginx, err := l.start("nginx", nil, l.cfg.nginx, "-p", dir, "-c", conf, "-e", "stderr")
	if err != nil {
		return target{}, err
	}
	t := target{name: targetNginx, addr: addr, proxies: []*process{nginx}}
	return t, waitServing(ctx, t)
}

// startPlain starts the plain Go proxy in front of backend.
func (l *launcher) startPlain(ctx context.Context, backend string) (target, error) {
	addr := l.addr()
	plain, err := l.start("plainproxy", nil, filepath.Join(l.cfg.bin, "plainproxy"), "--listen", addr, "--backend", backend)
	if err != nil {
		return target{}, err
	}
	t := target{name: targetPlain, addr: addr, proxies: []*process{plain}}
	return t, waitServing(ctx, t)
}

// waitServing waits until a SayHello through t succeeds.
func waitServing(ctx context.Context, t target) error {
	c, err := dial(t.addr)
	if err != nil {
		return err
	}
	defer c.close()
	if err := waitFor(ctx, t.proxies[0], c.sayHello); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	return nil
}

// stop stops every process, the last started first.
func (st *stack) stop() error {
	if st.counts != nil {
		st.counts.close()
	}
	var errs []error
	for i := len(st.procs) - 1; i >= 0; i-- {
		errs = append(errs, st.procs[i].stop())
	}
	return errors.Join(errs...)
}
