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
	return c.query(ctx, "/api/v1/query_range", url.Values{
		"query": {q.Expr},
		"start": {formatTime(q.Start)},
		"end":   {formatTime(q.End)},
		"step":  {strconv.FormatFloat(q.Step.Seconds(), 'f', -1, 64)},
	})
}

// Instant evaluates expr at t; a zero t leaves the time to Prometheus (its
// now), as the time parameter is then not sent.
func (c Client) Instant(ctx context.Context, expr string, t time.Time) ([]Series, error) {
	params := url.Values{"query": {expr}}
	if !t.IsZero() {
		params.Set("time", formatTime(t))
	}
	return c.query(ctx, "/api/v1/query", params)
}

// LabelValues lists the values of label on the series selector matches
// between start and end, as Grafana fills a label_values(selector, label)
// variable over the dashboard's time range (/api/v1/label/<label>/values).
func (c Client) LabelValues(ctx context.Context, label, selector string, start, end time.Time) ([]string, error) {
	params := url.Values{"match[]": {selector}, "start": {formatTime(start)}, "end": {formatTime(end)}}
	var values []string
	if err := c.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", params, &values); err != nil {
		return nil, fmt.Errorf("values of %s on %s: %w", label, selector, err)
	}
	return values, nil
}

// Config returns the configuration Prometheus runs with, as YAML
// (/api/v1/status/config): the loaded file, its defaults filled in.
func (c Client) Config(ctx context.Context) (string, error) {
	var data struct {
		YAML string `json:"yaml"`
	}
	if err := c.get(ctx, "/api/v1/status/config", nil, &data); err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	return data.YAML, nil
}

// query runs the query of params at path and decodes its result.
func (c Client) query(ctx context.Context, path string, params url.Values) ([]Series, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := c.get(ctx, path, params, &data); err != nil {
		return nil, fmt.Errorf("query %q: %w", params.Get("query"), err)
	}
	series, err := decodeResult(data.ResultType, data.Result)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", params.Get("query"), err)
	}
	return series, nil
}

// get calls the API at path and decodes the data of its answer into data,
// or returns the error Prometheus answered with.
func (c Client) get(ctx context.Context, path string, params url.Values, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	client := c.HTTP
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: decode: %w", resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	if err := json.Unmarshal(body.Data, data); err != nil {
		return fmt.Errorf("%s: decode data: %w", resp.Status, err)
	}
	return nil
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
