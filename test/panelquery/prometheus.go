package panelquery

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DefaultTimeout bounds each HTTP call of a Client without its own client.
const DefaultTimeout = 10 * time.Second

// Sample is one value of a series.
type Sample struct {
	Time  time.Time
	Value float64
}

// Series is one series of a result: its labels and its samples (one for an
// instant vector or a scalar).
type Series struct {
	Labels  map[string]string
	Samples []Sample
}

// Client runs queries against a Prometheus HTTP API.
type Client struct {
	// URL is the API's base, e.g. http://127.0.0.1:9090.
	URL string
	// HTTP makes the calls; nil = a client with DefaultTimeout.
	HTTP *http.Client
}

// Run sends q as Grafana would: an instant query at q.End, or a range query
// from q.Start to q.End every q.Step.
func (c Client) Run(ctx context.Context, q Query) ([]Series, error) {
	if q.Instant {
		return c.Instant(ctx, q.Expr, q.End)
	}
	return c.get(ctx, "/api/v1/query_range", url.Values{
		"query": {q.Expr},
		"start": {formatTime(q.Start)},
		"end":   {formatTime(q.End)},
		"step":  {strconv.FormatFloat(q.Step.Seconds(), 'f', -1, 64)},
	})
}

// Instant evaluates expr at t.
func (c Client) Instant(ctx context.Context, expr string, t time.Time) ([]Series, error) {
	return c.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(t)}})
}

func (c Client) get(ctx context.Context, path string, params url.Values) ([]Series, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", params.Get("query"), err)
	}
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", params.Get("query"), err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %s: decode: %w", params.Get("query"), resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", params.Get("query"), resp.Status, body.Error)
	}
	series, err := decodeResult(body.Data.ResultType, body.Data.Result)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", params.Get("query"), err)
	}
	return series, nil
}

// point is a sample as the API writes it: [unix seconds, "value"].
type point [2]any

func (p point) sample() (Sample, error) {
	ts, ok := p[0].(float64)
	s, ok2 := p[1].(string)
	if !ok || !ok2 {
		return Sample{}, fmt.Errorf("sample %v is not [time, \"value\"]", p)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Sample{}, fmt.Errorf("sample value %q: %w", s, err)
	}
	return Sample{Time: time.UnixMilli(int64(math.Round(ts * 1000))).UTC(), Value: v}, nil
}

func decodeResult(typ string, raw json.RawMessage) ([]Series, error) {
	var series []struct {
		Metric map[string]string `json:"metric"`
		Value  *point            `json:"value"`
		Values []point           `json:"values"`
	}
	switch typ {
	case "scalar":
		var p point
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("decode scalar: %w", err)
		}
		s, err := p.sample()
		return []Series{{Labels: map[string]string{}, Samples: []Sample{s}}}, err
	case "vector", "matrix":
		if err := json.Unmarshal(raw, &series); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
	default:
		return nil, fmt.Errorf("result type %q is not supported", typ)
	}
	out := make([]Series, 0, len(series))
	for _, s := range series {
		points := s.Values
		if s.Value != nil {
			points = []point{*s.Value}
		}
		samples := make([]Sample, 0, len(points))
		for _, p := range points {
			sample, err := p.sample()
			if err != nil {
				return nil, err
			}
			samples = append(samples, sample)
		}
		out = append(out, Series{Labels: s.Metric, Samples: samples})
	}
	return out, nil
}

// formatTime writes t as the API reads it: Unix seconds with milliseconds.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}
