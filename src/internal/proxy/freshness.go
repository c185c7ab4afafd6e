package proxy

import (
	"time"

	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/cachecontrol"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/policy"
)

// Where the windows a unary answer is served for come from, as passed to
// Observer.ObserveFreshness.
const (
	// FreshnessPolicy: the rule's own windows (the answer declares none, or
	// the rule ignores what it declares).
	FreshnessPolicy = "policy"
	// FreshnessBackend: the answer's cache-control.
	FreshnessBackend = "backend"
	// FreshnessCapped: the answer's cache-control, cut to the rule's maxTTL.
	FreshnessCapped = "backend_capped"
)

// FreshnessSources lists every source, for metrics that export each one up
// front.
var FreshnessSources = []string{FreshnessPolicy, FreshnessBackend, FreshnessCapped}

// Why a background call refreshes a kept answer, as passed to
// Observer.ObserveRefresh.
const (
	// RefreshEarly: the answer, fresh and still read, reached its early
	// refresh (collapse.Early).
	RefreshEarly = "early"
	// RefreshStale: the answer, past its TTL, is served stale meanwhile
	// (collapse.Revalidate).
	RefreshStale = "stale"
	// RefreshPurge: the answer, which a soft purge of many took back, is
	// refreshed in its turn (collapse.Purged).
	RefreshPurge = "purge"
)

// RefreshReasons lists every reason, for metrics that export each one up
// front.
var RefreshReasons = []string{RefreshEarly, RefreshStale, RefreshPurge}

// observeRefresh tells the observer of c, a call of method, when it is a
// background refresh.
func (p *Proxy) observeRefresh(method string, c *collapse.Call) {
	switch c.Background() {
	case collapse.Early:
		p.observer.ObserveRefresh(method, RefreshEarly)
	case collapse.Revalidate:
		p.observer.ObserveRefresh(method, RefreshStale)
	case collapse.Purged:
		p.observer.ObserveRefresh(method, RefreshPurge)
	}
}

// answer is what the group is given of a backend call that produced resp
// and err: a success, or an error the rule keeps as an answer (negative
// caching, served for the rule's TTL of such answers) as a value that is
// shared and may be kept, with the windows its cache-control declares; any
// other error as it is, never kept. Each caller's reply still carries the
// answer's status. An answer another replica owns is kept no longer than
// what is left of its life there.
func (p *Proxy) answer(method string, rule policy.Rule, resp *Response, err error) (*Response, error) {
	if err != nil {
		if resp == nil || rule.Negative == nil || !rule.Negative.Keeps(status.Code(resp.Err)) {
			return resp, err
		}
		resp.windows, resp.declared = collapse.Windows{TTL: rule.Negative.TTL}, true
	}
	if !resp.Private {
		p.observer.ObserveFreshness(method, declare(resp, rule))
	}
	if resp.tags.overflow {
		resp.windows, resp.declared = collapse.Windows{}, true // shared, never kept
	}
	if resp.aged {
		w := rule.Call.Windows()
		if resp.declared {
			w = resp.windows
		}
		resp.windows, resp.declared = within(w, resp.life), true
	}
	return resp, nil
}

// within returns w cut, window by window, to what is left of life: a copy
// of an answer never lives longer than the answer it copies.
func within(w, life collapse.Windows) collapse.Windows {
	return collapse.Windows{
		TTL:                  min(w.TTL, life.TTL),
		StaleWhileRevalidate: min(w.StaleWhileRevalidate, life.StaleWhileRevalidate),
		StaleIfError:         min(w.StaleIfError, life.StaleIfError),
	}
}

// declare sets the windows resp, a shareable answer, is served for from its
// cache-control, bounded by the rule's Declared (nil: the rule takes no
// declared windows), and returns where they come from. A lifetime it
// declares replaces the windows it has (the rule's, or a kept error's); a
// stale window it declares without a lifetime replaces that window alone,
// and must-revalidate drops the stale windows. Only what the answer
// declares is bounded. Whether it may be kept at all (private, no-store)
// its Private flag says already.
func declare(resp *Response, rule policy.Rule) string {
	d := rule.Declared
	if d == nil {
		return FreshnessPolicy
	}
	f := cachecontrol.Parse(resp.Header[cachecontrol.Header], resp.Trailer[cachecontrol.Header])
	if !f.Declared && !f.HasStaleWhileRevalidate && !f.HasStaleIfError && !f.NoStale {
		return FreshnessPolicy
	}
	capped := false
	bound := func(w time.Duration) time.Duration {
		if w > d.MaxTTL {
			capped = true
			return d.MaxTTL
		}
		return w
	}
	w := resp.windows // a kept error's
	if !resp.declared {
		w = rule.Call.Windows()
	}
	switch {
	case f.Declared:
		w = collapse.Windows{TTL: bound(f.TTL), StaleWhileRevalidate: bound(f.StaleWhileRevalidate), StaleIfError: bound(f.StaleIfError)}
	case f.NoStale:
		w.StaleWhileRevalidate, w.StaleIfError = 0, 0
	default:
		if f.HasStaleWhileRevalidate {
			w.StaleWhileRevalidate = bound(f.StaleWhileRevalidate)
		}
		if f.HasStaleIfError {
			w.StaleIfError = bound(f.StaleIfError)
		}
	}
	resp.windows, resp.declared = w, true
	if capped {
		return FreshnessCapped
	}
	return FreshnessBackend
}

// declaredWindows is collapse.Options.Declared for Responses.
func declaredWindows(r *Response) (collapse.Windows, bool) {
	return r.windows, r.declared
}
