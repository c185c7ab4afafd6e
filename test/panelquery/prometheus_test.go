package panelquery

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"
)

// fakeAPI answers like Prometheus' HTTP API and records the last request.
func fakeAPI(t *testing.T, body string, status int) (*httptest.Server, *url.Values) {
	t.Helper()
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()
		got.Set("path", r.URL.Path)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestClient_RunsInstantAndRangeQueries(t *testing.T) {
	end := time.Date(2026, 3, 31, 12, 0, 5, 0, time.UTC)
	tests := []struct {
		name       string
		q          Query
		body       string
		wantPath   string
		wantParams map[string]string
		want       []Series
	}{
		{
			name:       "instant vector",
			q:          Query{Expr: "up", Instant: true, End: end},
			body:       `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"a"},"value":[1790000005.5,"1"]}]}}`,
			wantPath:   "/api/v1/query",
			wantParams: map[string]string{"query": "up", "time": "1774958405.000"},
			want:       []Series{{Labels: map[string]string{"job": "a"}, Samples: []Sample{{time.UnixMilli(1790000005500).UTC(), 1}}}},
		},
		{
			name:       "range matrix",
			q:          Query{Expr: "rate(x[20s])", Start: end.Add(-10 * time.Second), End: end, Intervals: Intervals{Step: 5 * time.Second}},
			body:       `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"0"],[6,"NaN"],[11,"2.5"]]}]}}`,
			wantPath:   "/api/v1/query_range",
			wantParams: map[string]string{"query": "rate(x[20s])", "start": "1774958395.000", "end": "1774958405.000", "step": "5"},
			want:       []Series{{Labels: map[string]string{}, Samples: []Sample{{time.Unix(1, 0).UTC(), 0}, {time.Unix(6, 0).UTC(), math.NaN()}, {time.Unix(11, 0).UTC(), 2.5}}}},
		},
		{
			name:     "scalar",
			q:        Query{Expr: "1", Instant: true, End: end},
			body:     `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`,
			wantPath: "/api/v1/query",
			want:     []Series{{Labels: map[string]string{}, Samples: []Sample{{time.Unix(1, 0).UTC(), 1}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got := fakeAPI(t, tt.body, http.StatusOK)
			series, err := Client{URL: srv.URL, HTTP: srv.Client()}.Run(context.Background(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got.Get("path") != tt.wantPath {
				t.Errorf("path = %s, want %s", got.Get("path"), tt.wantPath)
			}
			for k, v := range tt.wantParams {
				if got.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, got.Get(k), v)
				}
			}
			if !sameSeries(series, tt.want) {
				t.Errorf("series = %+v, want %+v", series, tt.want)
			}
		})
	}
}

func TestClient_InstantAtTheZeroTimeLeavesTheTimeToPrometheus(t *testing.T) {
	srv, got := fakeAPI(t, `{"status":"success","data":{"resultType":"vector","result":[]}}`, http.StatusOK)
	if _, err := (Client{URL: srv.URL, HTTP: srv.Client()}).Instant(context.Background(), "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got.Get("path") != "/api/v1/query" || got.Get("query") != "up" || got.Has("time") {
		t.Errorf("request %v, want a query of up at /api/v1/query with no time", *got)
	}
}

func TestClient_ReadsTheConfig(t *testing.T) {
	const yaml = "global:\n  scrape_interval: 5s\n"
	srv, got := fakeAPI(t, fmt.Sprintf(`{"status":"success","data":{"yaml":%q}}`, yaml), http.StatusOK)
	cfg, err := (Client{URL: srv.URL, HTTP: srv.Client()}).Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("path") != "/api/v1/status/config" || cfg != yaml {
		t.Errorf("config from %s = %q, want %q from /api/v1/status/config", got.Get("path"), cfg, yaml)
	}
}

func TestClient_ListsLabelValuesOverTheRange(t *testing.T) {
	srv, got := fakeAPI(t, `{"status":"success","data":["/a.A/B","/a.A/C"]}`, http.StatusOK)
	end := time.Date(2026, 3, 31, 12, 0, 5, 0, time.UTC)
	const selector = `{__name__=~"x|y"}`
	values, err := Client{URL: srv.URL, HTTP: srv.Client()}.LabelValues(context.Background(), "method", selector, end.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("path") != "/api/v1/label/method/values" || got.Get("match[]") != selector || got.Get("start") != "1774958345.000" || got.Get("end") != "1774958405.000" {
		t.Errorf("request %v, want match[]=%s over the minute at /api/v1/label/method/values", *got, selector)
	}
	if !slices.Equal(values, []string{"/a.A/B", "/a.A/C"}) {
		t.Errorf("values = %q", values)
	}
}

func TestClient_ReportsPrometheusErrors(t *testing.T) {
	calls := map[string]func(Client) error{
		"label values": func(c Client) error {
			_, err := c.LabelValues(context.Background(), "method", "{", time.Now(), time.Now())
			return err
		},
		"instant query": func(c Client) error {
			_, err := c.Instant(context.Background(), "up{", time.Now())
			return err
		},
		"config": func(c Client) error {
			_, err := c.Config(context.Background())
			return err
		},
	}
	for _, tt := range []struct{ name, body string }{
		{"error status", `{"status":"error","errorType":"bad_data","error":"parse error"}`},
		{"not JSON", `<html>bad gateway</html>`},
	} {
		for call, run := range calls {
			t.Run(tt.name+", "+call, func(t *testing.T) {
				srv, _ := fakeAPI(t, tt.body, http.StatusBadRequest)
				if err := run(Client{URL: srv.URL, HTTP: srv.Client()}); err == nil {
					t.Error("no error")
				}
			})
		}
	}
}

func sameSeries(a, b []Series) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i].Labels) != len(b[i].Labels) || len(a[i].Samples) != len(b[i].Samples) {
			return false
		}
		for k, v := range b[i].Labels {
			if a[i].Labels[k] != v {
				return false
			}
		}
		for j, s := range b[i].Samples {
			got := a[i].Samples[j]
			same := got.Value == s.Value || (math.IsNaN(got.Value) && math.IsNaN(s.Value))
			if !got.Time.Equal(s.Time) || !same {
				return false
			}
		}
	}
	return true
}
