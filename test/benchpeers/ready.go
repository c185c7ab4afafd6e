package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
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
	want := []string{`action="` + action + `"`, `method="` + method + `"`}
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
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "collapser_method_rule_info{") && strings.HasSuffix(line, " 1") &&
				strings.Contains(line, want[0]) && strings.Contains(line, want[1]) {
				return nil
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", url, err)
		}
		return fmt.Errorf("%s: no collapser_method_rule_info with %s", url, strings.Join(want, ", "))
	}
}
