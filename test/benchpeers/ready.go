package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

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
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return fmt.Errorf("read %s: %w", url, err)
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
