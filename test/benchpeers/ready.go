package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// readyTimeout bounds how long a server may take to get ready.
const readyTimeout = 30 * time.Second

// waitFor calls check every 100 ms until it succeeds, failing early when p
// has exited and after readyTimeout at the latest with check's last error.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if exited, exitErr := p.exitErr(); exited {
			return fmt.Errorf("%s exited while starting (%v); log %s", p.name, exitErr, p.log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w; log %s", p.name, readyTimeout, err, p.log)
		case <-tick.C:
		}
	}
}

// collapserRuleIs returns a check that collapser's metrics at url give
// method the rule action ("collapse" or "passthrough"): it has learnt the
// method from the backend's reflection and follows the scenario's policy.
func collapserRuleIs(url, method, action string) func(context.Context) error {
	return func(ctx context.Context) error {
		families, err := scrape(ctx, url)
		if err != nil {
			return err
		}
		for _, m := range families["collapser_method_rule_info"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["action"] == action && m.GetGauge().GetValue() == 1 {
				return nil
			}
		}
		return fmt.Errorf("%s: no collapser_method_rule_info with action=%q, method=%q", url, action, method)
	}
}

// peerCheckCalls is how many calls reachesPeers makes per check, each with
// a key of its own: the chance that one of 3 peers owns none of them is
// below 3·(2/3)^30 ≈ 2·10⁻⁵.
const peerCheckCalls = 30

// reachesPeers returns a check that peerCheckCalls SayHello calls through c,
// each a new key, succeed and that none fell back to its collapser's own
// backend for want of the key's owner (collapser_peer_fallbacks_total at
// url does not grow): then the peer connections to the owners of those keys
// work. A collapser that does not forward such calls passes at once.
func reachesPeers(c *client, url string) func(context.Context) error {
	seq := 0
	return func(ctx context.Context) error {
		before, err := counterTotal(ctx, url, "collapser_peer_fallbacks_total")
		if err != nil {
			return err
		}
		for range peerCheckCalls {
			seq++
			if err := c.greet(ctx, fmt.Sprintf("peers ready %d", seq)); err != nil {
				return err
			}
		}
		after, err := counterTotal(ctx, url, "collapser_peer_fallbacks_total")
		if err != nil {
			return err
		}
		if after > before {
			return fmt.Errorf("%s: %v of %d calls fell back to its own backend: a peer is not reached yet", url, after-before, peerCheckCalls)
		}
		return nil
	}
}

// counterTotal returns the sum of the counter name's series at url, 0 if
// it has none.
func counterTotal(ctx context.Context, url, name string) (float64, error) {
	families, err := scrape(ctx, url)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, m := range families[name].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total, nil
}

// scrape reads the Prometheus text exposition at url.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	return families, nil
}
