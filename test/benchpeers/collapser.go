package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/collapser/collapser/src/pkitest"
)

// collapser is a collapser process of the stack and where it serves.
type collapser struct {
	proc       *process
	addr       string // gRPC, for callers
	metricsURL string
}

// target returns the target of calls to c alone, named name.
func (c collapser) target(name string) target {
	return target{name: name, addr: c.addr, proxies: []*process{c.proc}}
}

// startCollapser starts collapser in front of backend with the scenario's
// default rule, gRPC, metrics and admin ports of its own, the extra
// variables (NAME=value) and the extra flags, and waits until its metrics
// show the scenario's rule for SayHello: by then it has opened all its
// listeners. Only flags every collapser measured has are used (the harness
// also runs older builds, BIN_DIR); a newer setting goes in a variable,
// which an older build ignores.
func (l *launcher) startCollapser(ctx context.Context, name, backend string, env []string, extra ...string) (collapser, error) {
	env = slices.Clone(env)
	if l.sc.DefaultCollapse != "" {
		env = append(env, "COLLAPSER_DEFAULT_COLLAPSE="+l.sc.DefaultCollapse)
	}
	c := collapser{addr: l.addr()}
	metrics := l.addr()
	c.metricsURL = "http://" + metrics + "/metrics"
	argv := append([]string{filepath.Join(l.cfg.bin, "collapser"),
		"--listen", c.addr, "--backend", backend, "--metrics-listen", metrics,
		// The default admin address would be one for every collapser of the stack.
		"--admin-listen", l.addr()}, extra...)
	var err error
	if c.proc, err = l.start(name, env, argv...); err != nil {
		return c, err
	}
	return c, waitFor(ctx, c.proc, collapserRuleIs(c.metricsURL, sayHello, l.sc.collapserAction()))
}

// startLoneCollapser starts a collapser without peers in front of backend.
func (l *launcher) startLoneCollapser(ctx context.Context, backend string) (target, error) {
	c, err := l.startCollapser(ctx, "collapser", backend, nil)
	if err != nil {
		return target{}, err
	}
	t := c.target(targetCollapser)
	return t, waitServing(ctx, t)
}

// startPeers starts the scenario's Peers collapsers in front of backend,
// each listing all of them (itself included) as its peers, and returns the
// target that calls the first once a call through each has succeeded and
// the first reaches its peers. Each starts serving before any call is
// made, so no peer connection fails for a peer not started yet.
func (l *launcher) startPeers(ctx context.Context, backend string) (target, error) {
	peerAddrs := make([]string, l.sc.Peers)
	for i := range peerAddrs {
		peerAddrs[i] = l.addr()
	}
	list := strings.Join(peerAddrs, ",")
	// Every call between replicas carries the release's peer token.
	token := filepath.Join(l.cfg.workdir, l.sc.ID+"-peer-token")
	if err := os.WriteFile(token, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		return target{}, fmt.Errorf("peer token: %w", err)
	}
	var ca *pkitest.CA
	if l.sc.PeerTLS {
		var err error
		if ca, err = pkitest.NewCA(l.sc.ID + " CA"); err != nil {
			return target{}, err
		}
	}
	peers := make([]collapser, len(peerAddrs))
	for i, addr := range peerAddrs {
		name := fmt.Sprintf("collapser-peer%d", i+1)
		args := []string{"--peers", list, "--peer-listen", addr, "--peer-token-file", token}
		// Without mutual TLS a collapser refuses its peers unless told to
		// talk plain text.
		env := []string{"COLLAPSER_PEER_PLAINTEXT=true"}
		if ca != nil {
			env = nil
			f, err := ca.Issue(filepath.Join(l.cfg.workdir, l.sc.ID+"-"+name), "spiffe://bench/collapser")
			if err != nil {
				return target{}, err
			}
			args = append(args, "--peer-tls-cert-file", f.Cert, "--peer-tls-key-file", f.Key, "--peer-tls-ca-file", f.CA)
		}
		var err error
		if peers[i], err = l.startCollapser(ctx, name, backend, env, args...); err != nil {
			return target{}, err
		}
	}
	t := target{name: targetPeers, addr: peers[0].addr}
	for _, c := range peers {
		t.proxies = append(t.proxies, c.proc)
		if err := waitServing(ctx, c.target(c.proc.name)); err != nil {
			return target{}, err
		}
	}
	entry := peers[0]
	cl, err := dial(entry.addr)
	if err != nil {
		return target{}, err
	}
	defer cl.close()
	if err := waitFor(ctx, entry.proc, reachesPeers(cl, entry.metricsURL)); err != nil {
		return target{}, fmt.Errorf("%s: %w", t.name, err)
	}
	return t, nil
}
