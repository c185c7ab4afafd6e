package e2e

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/collapser/collapser/test/panelquery"
)

// source is a count the dashboard must agree with, and where it comes from.
type source struct {
	name  string
	value float64
}

// panelCheck checks what one panel shows.
type panelCheck func(v view, panel string) error

// expect is the expectation that every check holds of panel.
func expect(panel string, checks ...panelCheck) expectation {
	return expectation{panels: []string{panel}, check: func(v view) error {
		errs := make([]error, len(checks))
		for i, c := range checks {
			errs[i] = c(v, panel)
		}
		return errors.Join(errs...)
	}}
}

// total expects a stat panel to show what every source says.
func total(sources ...source) panelCheck {
	return func(v view, panel string) error {
		got, err := v.total(panel)
		if err != nil {
			return err
		}
		var says []string
		agree := true
		for _, s := range sources {
			says = append(says, fmt.Sprintf("%s %v", s.name, s.value))
			agree = agree && got == s.value
		}
		if !agree {
			return fmt.Errorf("shows %v; %s", got, strings.Join(says, ", "))
		}
		return nil
	}
}

// sawRate expects a rate panel's query, its series summed, to peak at
// count / $__rate_interval at least: one of its windows holds the scrape
// before the burst and the one after, and rate() only extrapolates upward.
func sawRate(refID string, count float64) panelCheck {
	return func(v view, panel string) error {
		peak, err := v.peak(panel, refID)
		if err != nil {
			return err
		}
		floor := count / v.queries[viewKey(panel, refID)].RateInterval.Seconds()
		if count == 0 || peak < floor {
			return fmt.Errorf("%s peaks at %.3f/s, want at least %v / %v = %.3f/s", refID, peak, count, v.queries[viewKey(panel, refID)].RateInterval, floor)
		}
		return nil
	}
}

// hasSeries expects a panel's queries to return data.
func hasSeries(refIDs ...string) panelCheck {
	return func(v view, panel string) error {
		var errs []error
		for _, ref := range refIDs {
			if len(v.results[viewKey(panel, ref)]) == 0 {
				errs = append(errs, fmt.Errorf("%s: no data", ref))
			}
		}
		return errors.Join(errs...)
	}
}

// outcomes expects a stat panel of one value per outcome to show exactly
// these outcomes and values.
func outcomes(want map[string]float64) panelCheck {
	return func(v view, panel string) error {
		got := map[string]float64{}
		for _, s := range v.results[viewKey(panel, "A")] {
			got[s.Labels["outcome"]] = lastValue(s)
		}
		if len(got) != len(want) {
			return fmt.Errorf("shows %v, want %v", got, want)
		}
		for outcome, n := range want {
			if g, ok := got[outcome]; !ok || g != n {
				return fmt.Errorf("shows %v, want %v", got, want)
			}
		}
		return nil
	}
}

// peakIs expects a time series query, its series summed, to peak at want.
func peakIs(refID string, want float64) panelCheck {
	return func(v view, panel string) error {
		peak, err := v.peak(panel, refID)
		if err == nil && peak != want {
			err = fmt.Errorf("%s peaks at %v, want %v", refID, peak, want)
		}
		return err
	}
}

// labelValues expects the series of a panel's query to carry exactly these
// values of label, want sorted.
func labelValues(refID, label string, want ...string) panelCheck {
	return func(v view, panel string) error {
		var got []string
		for _, s := range v.results[viewKey(panel, refID)] {
			got = append(got, s.Labels[label])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s: series by %s %q, want %q", refID, label, got, want)
		}
		return nil
	}
}

// seriesPeaks expects the series of a time series query whose label has
// one of want's values to peak at that value each.
func seriesPeaks(refID, label string, want map[string]float64) panelCheck {
	return func(v view, panel string) error {
		var errs []error
		seen := map[string]bool{}
		for _, s := range v.results[viewKey(panel, refID)] {
			value := s.Labels[label]
			w, ok := want[value]
			if !ok {
				continue
			}
			seen[value] = true
			peak := math.Inf(-1)
			for _, sample := range s.Samples {
				if !math.IsNaN(sample.Value) {
					peak = max(peak, sample.Value)
				}
			}
			if peak != w {
				errs = append(errs, fmt.Errorf("%s: %s=%s peaks at %v, want %v", refID, label, value, peak, w))
			}
		}
		for value := range want {
			if !seen[value] {
				errs = append(errs, fmt.Errorf("%s: no series with %s=%s", refID, label, value))
			}
		}
		return errors.Join(errs...)
	}
}

// quantileOnlyWhereCounted expects a histogram_quantile query to have a
// value only at the steps where the rate query counts of (another panel's
// query, the same observations counted) sum above 0: no observation, no
// quantile (NaN or no series at all).
func quantileOnlyWhereCounted(refID, countPanel, countRefID string) panelCheck {
	return func(v view, panel string) error {
		counted := map[time.Time]float64{}
		for _, s := range v.results[viewKey(countPanel, countRefID)] {
			for _, sample := range s.Samples {
				counted[sample.Time] += sample.Value
			}
		}
		for _, s := range v.results[viewKey(panel, refID)] {
			for _, sample := range s.Samples {
				if !math.IsNaN(sample.Value) && counted[sample.Time] <= 0 {
					return fmt.Errorf("%s is %v at %s, when %q counts nothing", refID, sample.Value, sample.Time.Format(time.TimeOnly), countPanel)
				}
			}
		}
		return nil
	}
}

// noSeries expects a panel's queries to return nothing.
func noSeries(refIDs ...string) panelCheck {
	return func(v view, panel string) error {
		var errs []error
		for _, ref := range refIDs {
			if series := v.results[viewKey(panel, ref)]; len(series) != 0 {
				errs = append(errs, fmt.Errorf("%s has %d series, want none: %v", ref, len(series), labelsOf(series)))
			}
		}
		return errors.Join(errs...)
	}
}

// labelsOf lists the series' labels, for failure messages.
func labelsOf(series []panelquery.Series) []map[string]string {
	out := make([]map[string]string, 0, len(series))
	for _, s := range series {
		out = append(out, s.Labels)
	}
	return out
}
