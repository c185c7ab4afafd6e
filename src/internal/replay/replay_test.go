package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is a stream the test writes: each value sent on msgs is a
// message, closing msgs ends it with err.
type upstream struct {
	header  metadata.MD
	msgs    chan []byte
	err     error
	trailer metadata.MD
}

// opened is an upstream as one open returned it, ended by that open's ctx.
type opened struct {
	*upstream
	ctx context.Context
}

func (u *upstream) Header() (metadata.MD, error) { return u.header, nil }
func (u *upstream) Trailer() metadata.MD         { return u.trailer }

func (u opened) Recv() ([]byte, error) {
	select {
	case m, ok := <-u.msgs:
		if !ok {
			if u.err != nil {
				return nil, u.err
			}
			return nil, io.EOF
		}
		return m, nil
	case <-u.ctx.Done():
		return nil, u.ctx.Err()
	}
}

// source opens its one upstream and counts the opens; started receives a
// value for each of the first 16 opens.
type source struct {
	opened  atomic.Int64
	up      *upstream
	started chan struct{}
	first   chan context.Context // the first open's context
	gate    chan struct{}        // when not nil, an open waits for it to close
}

func newSource(err error) *source {
	return &source{up: &upstream{header: metadata.Pairs("h", "1"), msgs: make(chan []byte), err: err, trailer: metadata.Pairs("t", "1")}, started: make(chan struct{}, 16), first: make(chan context.Context, 1)}
}

func (s *source) open(ctx context.Context) (Upstream, error) {
	if s.opened.Add(1) == 1 {
		s.first <- ctx
	}
	if s.gate != nil {
		<-s.gate
	}
	select {
	case s.started <- struct{}{}:
	default: // nobody counts the opens past the first 16
	}
	return opened{s.up, ctx}, nil
}

// firstContext returns the first open's context, once there has been one.
func (s *source) firstContext(t *testing.T) context.Context {
	t.Helper()
	ctx := testkit.Recv(t, "the first open", s.first)
	s.first <- ctx
	return ctx
}

// readAll reads rd to its end.
func readAll(t *testing.T, ctx context.Context, rd *Reader) ([]string, metadata.MD, error) {
	t.Helper()
	if _, err := rd.Header(ctx); err != nil {
		return nil, nil, err
	}
	var got []string
	for {
		msg, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			tr, st := rd.End()
			return got, tr, st
		}
		if err != nil {
			return got, nil, err
		}
		got = append(got, string(msg))
	}
}

func send(t *testing.T, src *source, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		select {
		case src.up.msgs <- []byte(fmt.Sprint("m", i)):
		case <-time.After(testkit.DefaultTimeout):
			t.Fatalf("the pump did not take message %d", i)
		}
	}
}

func want(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprint("m", i))
	}
	return out
}

type readResult struct {
	msgs    []string
	trailer metadata.MD
	err     error
}

func goRead(t *testing.T, rd *Reader) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		defer rd.Close()
		msgs, tr, err := readAll(t, testkit.Context(t), rd)
		ch <- readResult{msgs, tr, err}
	}()
	return ch
}

func TestStreams_CallersShareOneUpstreamAndLateJoinersGetEveryMessage(t *testing.T) {
	s := New(Options{})
	src := newSource(nil)
	early := make([]<-chan readResult, 5)
	for i := range early {
		rd, o := s.Join("k", Life{TTL: 0}, src.open)
		if want := map[bool]Outcome{true: Lead, false: Join}[i == 0]; o != want {
			t.Fatalf("caller %d: %v, want %v", i, o, want)
		}
		early[i] = goRead(t, rd)
	}
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 50)
	late, o := s.Join("k", Life{TTL: 0}, src.open) // joins at message 50
	if o != Join {
		t.Fatalf("late caller: %v, want joined", o)
	}
	lateResult := goRead(t, late)
	send(t, src, 50, 100)
	close(src.up.msgs)
	for i, ch := range append(early, lateResult) {
		r := testkit.Recv(t, "a reader's end", ch)
		if r.err != nil || !slices.Equal(r.msgs, want(100)) || r.trailer.Get("t")[0] != "1" {
			t.Errorf("reader %d: %d messages, err %v, trailer %v; want all 100 in order, OK", i, len(r.msgs), r.err, r.trailer)
		}
	}
	if n := src.opened.Load(); n != 1 {
		t.Errorf("upstreams opened = %d, want 1", n)
	}
}

func TestStreams_ErrorMidStreamReachesEveryReaderAfterItsMessages(t *testing.T) {
	s := New(Options{})
	boom := errors.New("aborted")
	src := newSource(boom)
	var results []<-chan readResult
	for range 3 {
		rd, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
		results = append(results, goRead(t, rd))
	}
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 30)
	close(src.up.msgs)
	for _, ch := range results {
		if r := testkit.Recv(t, "a reader's end", ch); !errors.Is(r.err, boom) || !slices.Equal(r.msgs, want(30)) {
			t.Errorf("%d messages, err %v; want 30 then the error", len(r.msgs), r.err)
		}
	}
	rd, o := s.Join("k", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Lead {
		t.Errorf("after a failed stream: %v, want a new one (errors are not kept)", o)
	}
	rd.Close()
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
}

func waitStats(t *testing.T, s *Streams, cond func(Stats) bool) {
	t.Helper()
	testkit.WaitFor(t, "stream stats", func() bool { return cond(s.Stats()) })
}

func TestStreams_AFinishedStreamIsReplayedWholeForItsTTL(t *testing.T) {
	now := time.Unix(0, 0)
	s := New(Options{})
	s.now = func() time.Time { return now }
	src := newSource(nil)
	rd, _ := s.Join("k", Life{TTL: time.Minute}, src.open)
	first := goRead(t, rd)
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 10)
	close(src.up.msgs)
	testkit.Recv(t, "the first reader's end", first)
	waitStats(t, s, func(st Stats) bool { return st.Held == 1 })

	rd, o := s.Join("k", Life{TTL: time.Minute}, newSource(nil).open)
	if o != Replay {
		t.Fatalf("within the TTL: %v, want replayed", o)
	}
	if r := testkit.Recv(t, "the replay's end", goRead(t, rd)); r.err != nil || !slices.Equal(r.msgs, want(10)) {
		t.Errorf("replay: %d messages, err %v", len(r.msgs), r.err)
	}
	now = now.Add(time.Minute)
	if rd, o := s.Join("k", Life{TTL: time.Minute}, newSource(nil).open); o != Lead {
		t.Errorf("after the TTL: %v, want a new stream", o)
	} else {
		rd.Close()
	}
}

func TestStreams_OutgrownRecordTakesNoNewReaderAndIsNotKept(t *testing.T) {
	s := New(Options{Limits: Limits{MaxMessages: 10}})
	src := newSource(nil)
	holder, _ := s.Join("k", Life{TTL: time.Hour}, src.open) // keeps the record live while it reads nothing
	defer holder.Close()
	rd, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
	reader := goRead(t, rd)
	testkit.Recv(t, "the open", src.started)
	send(t, src, 0, 20)
	if _, o := s.Join("k", Life{TTL: time.Hour}, src.open); o != Own {
		t.Errorf("joining a record past its bounds: %v, want own", o)
	}
	close(src.up.msgs)
	if r := testkit.Recv(t, "the reader's end", reader); r.err != nil && !errors.Is(r.err, ErrBehind) {
		t.Errorf("reader: %v", r.err)
	}
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
	if st := s.Stats(); st.Held != 0 {
		t.Errorf("stats %+v: an outgrown stream was kept", st)
	}
}

func TestStreams_AReaderThatStopsDoesNotDelayTheOthersAndFallsBehind(t *testing.T) {
	s := New(Options{Limits: Limits{MaxMessages: 5}})
	src := newSource(nil)
	stalled, _ := s.Join("k", Life{TTL: 0}, src.open)
	defer stalled.Close()
	if _, err := stalled.Header(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	testkit.Recv(t, "the open", src.started)
	reader, _ := s.Join("k", Life{TTL: 0}, src.open)
	result := goRead(t, reader)
	// The pump takes every message without the stalled reader reading one:
	// send would time out if the pump waited for it.
	send(t, src, 0, 50)
	close(src.up.msgs)
	if r := testkit.Recv(t, "the reading reader's end", result); r.err != nil && !errors.Is(r.err, ErrBehind) {
		t.Errorf("the reading reader: %v", r.err)
	}
	if _, err := stalled.Next(testkit.Context(t)); !errors.Is(err, ErrBehind) {
		t.Errorf("the stalled reader: %v, want ErrBehind", err)
	}
}

func TestStreams_LastReaderLeavingCancelsTheUpstream(t *testing.T) {
	s := New(Options{})
	src := newSource(nil)
	var readers []*Reader
	for range 3 {
		rd, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
		readers = append(readers, rd)
	}
	testkit.Recv(t, "the open", src.started)
	for _, rd := range readers[:2] {
		rd.Close()
	}
	upCtx := src.firstContext(t)
	if err := upCtx.Err(); err != nil {
		t.Fatalf("upstream cancelled (%v) while a reader remained", err)
	}
	readers[2].Close()
	testkit.WaitFor(t, "the upstream's cancellation", func() bool { return upCtx.Err() != nil })
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 && st.Held == 0 })
	rd, o := s.Join("k", Life{TTL: time.Hour}, newSource(nil).open)
	if o != Lead {
		t.Errorf("after the last reader left: %v, want a new stream", o)
	}
	rd.Close()
}

func TestStreams_PrivateHeaderGoesOnlyToTheLeader(t *testing.T) {
	s := New(Options{Private: func(md metadata.MD) bool { return len(md.Get("set-cookie")) > 0 }})
	src := newSource(nil)
	src.up.header = metadata.Pairs("set-cookie", "s=1")
	src.gate = make(chan struct{}) // the follower joins before the header comes
	lead, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
	follower, _ := s.Join("k", Life{TTL: time.Hour}, src.open)
	defer follower.Close()
	close(src.gate)
	if _, err := follower.Header(testkit.Context(t)); !errors.Is(err, ErrPrivate) {
		t.Errorf("follower's header: %v, want ErrPrivate", err)
	}
	if _, o := s.Join("k", Life{TTL: time.Hour}, src.open); o != Own {
		t.Errorf("a new caller: %v, want own", o)
	}
	r := goRead(t, lead)
	send(t, src, 0, 3)
	close(src.up.msgs)
	if got := testkit.Recv(t, "the leader's end", r); got.err != nil || len(got.msgs) != 3 {
		t.Errorf("leader: %+v", got)
	}
}

func TestStreams_ConcurrentReadersJoinAndLeave(t *testing.T) {
	s := New(Options{Limits: Limits{MaxMessages: 50}})
	src := newSource(nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			rd, o := s.Join("k", Life{TTL: time.Millisecond}, src.open)
			if o == Own {
				return
			}
			defer rd.Close()
			ctx, cancel := context.WithTimeout(testkit.Context(t), time.Duration(i)*time.Millisecond)
			defer cancel()
			_, _, _ = readAll(t, ctx, rd)
		})
	}
	upCtx := src.firstContext(t)
	go func() {
		for i := 0; ; i++ {
			select {
			case src.up.msgs <- []byte(fmt.Sprint("m", i)):
			case <-upCtx.Done():
				return
			}
		}
	}()
	wg.Wait()
	waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
}

func TestStreams_ARecordEndingBadlyIsNeverReplayed(t *testing.T) {
	// finish takes a failed or private record out of the map as it records
	// its end. Should one be found there all the same, it is not replayed:
	// the caller starts a stream of its own as leader, and the old record's
	// finish leaves the new one alone.
	for name, ending := range map[string]func(r *record){
		"failed":  func(r *record) { r.err = errors.New("aborted") },
		"private": func(r *record) { r.private, r.closed = true, true },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(Options{})
			old, _ := newRecord(context.Background(), s, "k", Life{TTL: time.Hour})
			old.ended = true
			ending(old)
			s.m["k"] = old // ended, and still the key's
			rd, o := s.Join("k", Life{TTL: time.Hour}, newSource(nil).open)
			if o != Lead {
				t.Fatalf("caller of the ended record: %v, want a stream of its own as leader", o)
			}
			s.finish(old, old.trailer, old.err, old.life.TTL)
			if s.m["k"] == old || s.m["k"] == nil {
				t.Error("finish of the old record dropped the new one, or the new one is not the key's")
			}
			rd.Close()
			waitStats(t, s, func(st Stats) bool { return st.Live == 0 })
		})
	}
}

// sourcedUpstream is an upstream that says where it comes from.
type sourcedUpstream struct {
	Upstream
	name string
}

func (s sourcedUpstream) Source() any { return s.name }

func TestReader_SourceIsWhatTheUpstreamSaidOfItself(t *testing.T) {
	for _, tt := range []struct {
		name string
		wrap func(Upstream) Upstream
		want any
	}{
		{"sourced", func(u Upstream) Upstream { return sourcedUpstream{u, "opener"} }, "opener"},
		{"silent", func(u Upstream) Upstream { return u }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Options{})
			src := newSource(nil)
			open := func(ctx context.Context) (Upstream, error) {
				up, err := src.open(ctx)
				return tt.wrap(up), err
			}
			lead, _ := s.Join("k", Life{TTL: time.Hour}, open)
			follower, o := s.Join("k", Life{TTL: time.Hour}, open)
			if o != Join {
				t.Fatalf("second caller: %v, want joined", o)
			}
			results := []<-chan readResult{goRead(t, lead), goRead(t, follower)}
			testkit.Recv(t, "the open", src.started)
			send(t, src, 0, 3)
			close(src.up.msgs)
			for _, ch := range results {
				testkit.Recv(t, "a reader's end", ch)
			}
			replayed, o := s.Join("k", Life{TTL: time.Hour}, open)
			if o != Replay {
				t.Fatalf("third caller: %v, want replayed", o)
			}
			defer replayed.Close()
			for i, rd := range []*Reader{lead, follower, replayed} {
				if got := rd.Source(); got != tt.want {
					t.Errorf("reader %d: Source() = %v, want %v", i, got, tt.want)
				}
			}
		})
	}
}
