package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestReader_LeftIsWhatIsLeftOfTheRecordsLife(t *testing.T) {
	clock := testkit.NewClock(time.Unix(0, 0))
	s := New(Options{Now: clock.Now})
	src := newSource(nil)
	lead, _ := s.Join("k", Life{TTL: time.Minute}, src.open)
	defer lead.Close()
	if got := lead.Left(); got != 0 {
		t.Errorf("Left of a live record = %v, want 0: it is not kept yet", got)
	}
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 3)
	close(src.up.msgs)
	// Left is known as soon as End is: a reader that read the end tells
	// at once how long the record is kept.
	if _, _, err := readAll(t, testkit.Context(t), lead); err != nil {
		t.Fatal(err)
	}
	if got := lead.Left(); got != time.Minute {
		t.Errorf("Left after the end = %v, want the TTL", got)
	}
	clock.Advance(20 * time.Second)
	replayed, o := s.Join("k", Life{TTL: time.Minute}, newSource(nil).open)
	if o != Replay {
		t.Fatalf("a caller at 20s: %v, want replayed", o)
	}
	defer replayed.Close()
	if got := replayed.Left(); got != 40*time.Second {
		t.Errorf("Left of the replayed record at 20s = %v, want 40s", got)
	}
	s.Purge(ofKey("k"))
	if got := replayed.Left(); got != 0 {
		t.Errorf("Left of a purged record = %v, want 0", got)
	}
}

func TestReader_LeftOfARecordNotKeptIsZero(t *testing.T) {
	for name, tt := range map[string]struct {
		err  error
		ttl  time.Duration
		aged bool // its upstream says it may not be kept
	}{
		"failed":    {err: errors.New("aborted"), ttl: time.Minute},
		"no TTL":    {},
		"none left": {ttl: time.Minute, aged: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := New(Options{})
			src := newSource(tt.err)
			open := func(ctx context.Context) (Upstream, error) {
				up, err := src.open(ctx)
				if tt.aged {
					return aged{up, 0, true}, err
				}
				return up, err
			}
			rd, _ := s.Join("k", Life{TTL: tt.ttl}, open)
			defer rd.Close()
			close(src.up.msgs)
			_, _, _ = readAll(t, testkit.Context(t), rd)
			if got := rd.Left(); got != 0 {
				t.Errorf("Left = %v, want 0", got)
			}
		})
	}
}

func TestReader_LeftIsKnownTheMomentTheEndIs(t *testing.T) {
	// The end and whether the record is kept are recorded at once: no
	// reader that read the end sees a record that is not kept yet.
	for i := range 200 {
		s := New(Options{})
		src := newSource(nil)
		rd, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
		close(src.up.msgs)
		if _, _, err := readAll(t, testkit.Context(t), rd); err != nil {
			t.Fatal(err)
		}
		if got := rd.Left(); got <= 0 {
			t.Fatalf("run %d: Left right after the end = %v, want the record kept", i, got)
		}
		rd.Close()
	}
}
