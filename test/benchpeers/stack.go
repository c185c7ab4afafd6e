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
	targetNginx     = "nginx"
	targetPlain     = "plain"
)

// target is where a run sends its calls.
type target struct {
	name  string
	addr  string
	proxy *process // nil for direct
}

// stack is one scenario's servers on loopback: the hello backend and the
// three proxies in front of it.
type stack struct {
	backend    *process
	counts     *client    // of the backend, for its own SayHello count
	clientCPUs string     // where ghz runs against this stack
	targets    []target   // direct first
	procs      []*process // every process started, in order
}

// startStack starts the backend and the proxies for sc on free ports, all
// pinned to the scenario's server CPUs, and returns once a call through each has
// succeeded and collapser follows the scenario's rule for SayHello.
func startStack(ctx context.Context, cfg config, sc scenario) (st *stack, err error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	backendAddr, backendMetrics, collapserAddr, collapserMetrics, nginxAddr, plainAddr :=
		addr(0), addr(1), addr(2), addr(3), addr(4), addr(5)

	clientCPUs, serverCPUs := cfg.cpus(sc)
	st = &stack{clientCPUs: clientCPUs}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.stop())
		}
	}()
	start := func(name string, env []string, argv ...string) (*process, error) {
		p, err := startProcess(cfg.workdir, sc.ID+"-"+name, serverCPUs, env, argv...)
		if p != nil {
			st.procs = append(st.procs, p)
		}
		return p, err
	}

	if st.backend, err = start("hello-backend", nil, filepath.Join(cfg.bin, "hello-backend"),
		"--listen", backendAddr, "--metrics-listen", backendMetrics, "--latency", sc.Latency.String()); err != nil {
		return st, err
	}
	if st.counts, err = dial(backendAddr); err != nil {
		return st, err
	}
	if err := waitFor(ctx, st.backend, func(ctx context.Context) error {
		_, err := st.counts.sayHelloCalls(ctx)
		return err
	}); err != nil {
		return st, err
	}
	st.targets = append(st.targets, target{name: targetDirect, addr: backendAddr})

	var env []string
	if sc.DefaultCollapse != "" {
		env = append(env, "COLLAPSER_DEFAULT_COLLAPSE="+sc.DefaultCollapse)
	}
	collapser, err := start("collapser", env, filepath.Join(cfg.bin, "collapser"),
		"--listen", collapserAddr, "--backend", backendAddr, "--metrics-listen", collapserMetrics)
	if err != nil {
		return st, err
	}
	if err := waitFor(ctx, collapser, collapserRuleIs("http://"+collapserMetrics+"/metrics", sayHello, sc.collapserAction())); err != nil {
		return st, err
	}
	st.targets = append(st.targets, target{name: targetCollapser, addr: collapserAddr, proxy: collapser})

	workers, _ := countCPUs(serverCPUs) // checked by parseConfig
	nginxDir := filepath.Join(cfg.workdir, sc.ID+"-nginx")
	conf, err := writeNginxConf(nginxDir, nginxAddr, backendAddr, workers, cfg.burst.requests)
	if err != nil {
		return st, err
	}
	nginx, err := start("nginx", nil, cfg.nginx, "-p", nginxDir, "-c", conf, "-e", "stderr")
	if err != nil {
		return st, err
	}
	st.targets = append(st.targets, target{name: targetNginx, addr: nginxAddr, proxy: nginx})

	plain, err := start("plainproxy", nil, filepath.Join(cfg.bin, "plainproxy"), "--listen", plainAddr, "--backend", backendAddr)
	if err != nil {
		return st, err
	}
	st.targets = append(st.targets, target{name: targetPlain, addr: plainAddr, proxy: plain})

	for _, t := range st.targets[1:] {
		if err := waitServing(ctx, t); err != nil {
			return st, err
		}
	}
	return st, nil
}

// waitServing waits until a SayHello through t succeeds.
func waitServing(ctx context.Context, t target) error {
	c, err := dial(t.addr)
	if err != nil {
		return err
	}
	defer c.close()
	if err := waitFor(ctx, t.proxy, c.sayHello); err != nil {
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
