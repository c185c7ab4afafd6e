package replay

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/heapsize"
)

// recordOverhead is what a kept record holds besides its key, metadata and
// messages: the record and its changed channel as allocated, and its slots
// in the streams' map and heap.
var recordOverhead = heapsize.Of(int(unsafe.Sizeof(record{}))) + heapsize.Chan + heapsize.IndexSlot

// record is one upstream's header, messages and end, as far as it has come.
type record struct {
	key     string
	streams *Streams
	life    Life
	cancel  context.CancelFunc // of the upstream's context; nil once it ended

	mu      sync.Mutex
	changed chan struct{} // closed, and replaced, at every change; guarded by mu
	// Guarded by mu.
	header    metadata.MD
	headerSet bool
	private   bool     // the header or trailer is private: only the leader may see it
	frames    [][]byte // messages first..first+len-1 of the stream
	first     int
	bytes     int64 // the frames' arrays hold, as allocated
	closed    bool  // takes no new reader: outgrew its bounds, went private or lost its readers
	ended     bool
	err       error // the upstream's end: nil for OK
	trailer   metadata.MD
	readers   int // of a live record
	source    any // what a Sourced upstream said of itself

	// Guarded by streams.mu.
	expires  time.Time
	refresh  time.Time // when a read of the kept record starts its refresh; zero for none
	heldSize int64
	index    int // in streams.held; -1 when not kept
	// refresher is the live record that refreshes this kept one, and
	// replaces the kept record it refreshes; nil for none.
	refresher, replaces *record
}

// newRecord returns a record for key, read by its first reader, and the
// context its upstream is read under, which belongs to no caller: parent's
// values (Refreshing) and nothing else.
func newRecord(parent context.Context, s *Streams, key string, life Life) (*record, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	return &record{key: key, streams: s, life: life, cancel: cancel, changed: make(chan struct{}), readers: 1, index: -1}, ctx
}

// Expiry orders kept records by when they expire (expiryheap.Item).
func (r *record) Expiry() int64 { return sinceEpoch(r.expires) }

// sinceEpoch is t as Streams.held orders it: its time from epoch, on the
// monotonic clock when t reads it (Streams.now's do).
func sinceEpoch(t time.Time) int64 { return int64(t.Sub(epoch)) }

// epoch is the origin of the records' expiries in Streams.held.
var epoch = time.Now()

// HeapIndex is where Streams.held keeps r's position (expiryheap.Item).
func (r *record) HeapIndex() *int { return &r.index }

// pump reads the upstream, opened under ctx, into the record until it
// ends. It never waits for a reader.
func (r *record) pump(ctx context.Context, open Open) {
	up, err := open(ctx)
	if err != nil {
		r.end(nil, err)
		return
	}
	var source any
	if s, ok := up.(Sourced); ok {
		source = s.Source()
	}
	header, err := up.Header()
	r.update(func() {
		r.header, r.headerSet, r.source = header, true, source
		if r.streams.private != nil && r.streams.private(header) {
			r.private, r.closed = true, true
		}
	})
	if err != nil {
		r.end(up, err)
		return
	}
	for {
		msg, err := up.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			r.end(up, err)
			return
		}
		r.update(func() { r.append(msg) })
	}
}

// append adds msg, keeping only the newest messages within the bounds once
// the stream outgrows them. The caller holds r.mu.
func (r *record) append(msg []byte) {
	r.frames = append(r.frames, msg)
	r.bytes += heapsize.Bytes(msg)
	for len(r.frames) > 1 && (r.bytes > r.streams.maxBytes || len(r.frames) > r.streams.maxMessages) {
		r.closed = true
		r.bytes -= heapsize.Bytes(r.frames[0])
		r.frames[0] = nil
		r.frames = r.frames[1:]
		r.first++
	}
}

// update applies change under r.mu and wakes every reader.
func (r *record) update(change func()) {
	r.mu.Lock()
	change()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// end tells the streams of the end of up (nil when it did not open), and
// how long the record may be kept: its TTL, or less when up says so
// (Aged).
func (r *record) end(up Upstream, err error) {
	var trailer metadata.MD
	ttl := r.life.TTL
	if up != nil {
		trailer = up.Trailer()
		if a, ok := up.(Aged); ok {
			if left, ok := a.Left(); ok {
				ttl = min(ttl, left)
			}
		}
	}
	r.streams.finish(r, trailer, err, ttl)
}

// size is what a kept record counts against Limits.MaxHeldBytes: what it
// holds as allocated, its messages' arrays and the array of their slices
// at their capacity. The caller holds r.mu.
func (r *record) size() int64 {
	return recordOverhead + heapsize.String(r.key) + heapsize.MD(r.header) + heapsize.MD(r.trailer) +
		heapsize.Of(cap(r.frames)*int(unsafe.Sizeof([]byte(nil)))) + r.bytes + sourceSize(r.source)
}

// sourceSize returns what a record holds for its upstream's source
// (Sourced): the value's own bytes as allocated, what a pointer points to
// or a value boxed in the interface, not what those point to in turn.
func sourceSize(source any) int64 {
	if source == nil {
		return 0
	}
	v := reflect.ValueOf(source)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0
		}
		return heapsize.Of(int(v.Type().Elem().Size()))
	}
	return heapsize.Of(int(v.Type().Size()))
}

// Reader is one caller's cursor into a record. It is not safe for
// concurrent use; Close it when done.
type Reader struct {
	r      *record
	next   int // the next message to read
	lead   bool
	closed bool
}

// wait returns, under r.mu, once ready holds or ctx ends.
func (rd *Reader) wait(ctx context.Context, ready func() bool) error {
	r := rd.r
	for {
		r.mu.Lock()
		if ready() {
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			r.mu.Lock()
			return ctx.Err()
		}
	}
}

// Header waits for the stream's header (nil for an answer of trailers
// only) or ctx's end. A follower of a private stream gets ErrPrivate.
func (rd *Reader) Header(ctx context.Context) (metadata.MD, error) {
	r := rd.r
	err := rd.wait(ctx, func() bool { return r.headerSet || r.ended })
	defer r.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case r.private && !rd.lead:
		return nil, ErrPrivate
	}
	return r.header, nil
}

// Left returns, once Next has returned io.EOF, how much longer the record
// is kept for replay: 0 for a record that is not kept (it failed, outgrew
// its bounds, was private, purged or dropped to make room, or its life is
// over), or that has not ended. The proxy tells it to a peer that copies
// the record (Aged).
func (rd *Reader) Left() time.Duration {
	s, r := rd.r.streams, rd.r
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.index < 0 {
		return 0
	}
	return max(0, r.expires.Sub(s.now()))
}

// Source returns what the record's upstream said of itself (Sourced), once
// Header has returned; nil for an upstream that says nothing.
func (rd *Reader) Source() any {
	rd.r.mu.Lock()
	defer rd.r.mu.Unlock()
	return rd.r.source
}

// Next returns the next message, waiting for it while the stream is live;
// io.EOF at the stream's end (see End), ErrBehind when the record no
// longer holds it, or ctx's error.
func (rd *Reader) Next(ctx context.Context) ([]byte, error) {
	r := rd.r
	err := rd.wait(ctx, func() bool { return rd.next < r.first+len(r.frames) || r.ended || rd.next < r.first })
	defer r.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case rd.next < r.first:
		return nil, ErrBehind
	case rd.next < r.first+len(r.frames):
		msg := r.frames[rd.next-r.first]
		rd.next++
		return msg, nil
	}
	return nil, io.EOF
}

// End returns the stream's trailer and status (nil for OK) once Next has
// returned io.EOF. A follower of a stream whose trailer is private gets no
// trailer, and the same status.
func (rd *Reader) End() (metadata.MD, error) {
	r := rd.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.private && !rd.lead {
		return nil, r.err
	}
	return r.trailer, r.err
}

// Close leaves the record. When the last reader of a live record leaves,
// its upstream is cancelled.
func (rd *Reader) Close() {
	if rd.closed {
		return
	}
	rd.closed = true
	s, r := rd.r.streams, rd.r
	s.mu.Lock()
	defer s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.readers--; r.readers == 0 {
		s.leave(r)
	}
}
