package panelquery

import (
	"testing"
	"time"
)

func TestTimeRange(t *testing.T) {
	now := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		from, to   string
		wantFrom   time.Time
		wantErrMsg bool
	}{
		{from: "now-15m", to: "now", wantFrom: now.Add(-15 * time.Minute)},
		{from: "now-2d", to: "now", wantFrom: now.Add(-48 * time.Hour)},
		{from: "now-1M", to: "now", wantFrom: time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC)},
		{from: "now/d", to: "now", wantErrMsg: true},
		{from: "now", to: "now-1h", wantErrMsg: true},
	}
	for _, tt := range tests {
		d := &Dashboard{}
		d.Time.From, d.Time.To = tt.from, tt.to
		from, to, err := d.TimeRange(now)
		if (err != nil) != tt.wantErrMsg {
			t.Errorf("TimeRange(%s, %s) error = %v, want error %v", tt.from, tt.to, err, tt.wantErrMsg)
			continue
		}
		if err == nil && (!from.Equal(tt.wantFrom) || !to.Equal(now)) {
			t.Errorf("TimeRange(%s, %s) = %v, %v; want %v, %v", tt.from, tt.to, from, to, tt.wantFrom, now)
		}
	}
}
