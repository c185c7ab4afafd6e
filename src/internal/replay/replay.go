// Package replay shares one backend stream among identical server-streaming
// calls, and replays it to callers that come late.
//
// The first caller for a key starts a recording: one goroutine reads the
// backend stream (the upstream) into an append-only record of its header,
// messages and end. Every caller of the key gets a Reader, a cursor of its
// own into that record: it reads every message from the first, replayed
// from the record, then the live ones as they come, in order, then the same
// end. The goroutine never waits for a reader; a reader that falls behind
// what the record still holds is ended with ErrBehind, and the others go on.
//
// Bounds, each where the bytes are taken: a record holds at most
// Limits.MaxBytes and Limits.MaxMessages of messages. Past them it keeps
// only the newest within the bounds, takes no new reader (a caller then
// makes a stream of its own, Own) and is not kept after its end. A stream
// that ended well within them is kept for its TTL (or less, when its
// upstream says so: Aged) and replayed whole to the callers of that time,
// within Limits.MaxHeldBytes over all kept streams. A kept record read at
// or after its early refresh point (Life.EarlyRefresh) is replaced by a new
// record of the key, read in the background while its callers are served
// the kept one. A purge (Streams.Purge)
// takes a kept record back, and detaches a live one: its readers read it
// to its end, and the next caller starts a new record.
// When the last reader of a live record leaves, the upstream is cancelled:
// an endless stream nobody reads ends.
//
// The package knows of gRPC only the metadata type; the proxy opens the
// upstream and writes what a Reader reads to its caller.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"
)

// Defaults for the zero values of Limits.
const (
	// DefaultMaxBytes bounds the message bytes one record holds.
	DefaultMaxBytes = 4 << 20
	// DefaultMaxMessages bounds the messages one record holds.
	DefaultMaxMessages = 10_000
	// DefaultMaxHeldBytes bounds the bytes of the ended streams kept for replay.
	DefaultMaxHeldBytes = 64 << 20
)

// ErrBehind ends a Reader whose next message the record no longer holds: it
// fell further behind the upstream than the record's bounds.
var ErrBehind = errors.New("replay: the reader fell behind what the record holds")

// ErrPrivate is what a follower's Header returns when the upstream's header
// is private (Options.Private): the follower must make a stream of its own.
var ErrPrivate = errors.New("replay: the stream's header is private")

// Limits bound what Streams hold. A zero field takes its default.
type Limits struct {
	// MaxBytes and MaxMessages bound one record (default DefaultMaxBytes,
	// DefaultMaxMessages).
	MaxBytes    int64
	MaxMessages int
	// MaxHeldBytes bounds the ended streams kept for replay, counting their
	// keys, header, messages, trailer and source (default
	// DefaultMaxHeldBytes).
	MaxHeldBytes int64
}

// Validate reports a negative limit.
func (l Limits) Validate() error {
	if l.MaxBytes < 0 || l.MaxMessages < 0 || l.MaxHeldBytes < 0 {
		return fmt.Errorf("replay: a negative limit in %+v", l)
	}
	return nil
}

// Options configures Streams. The zero value takes the defaults.
type Options struct {
	// Limits bound each record and the records kept.
	Limits
	// Private reports whether a header or trailer makes a stream private:
	// it goes only to the caller that started it and is not kept. Nil: no
	// stream is private.
	Private func(metadata.MD) bool
	// Now is the clock (default time.Now); a test moves its own.
	Now func() time.Time
}

// Upstream is the one backend stream a record reads.
type Upstream interface {
	// Header blocks until the stream's header arrives; nil metadata for an
	// answer of trailers only.
	Header() (metadata.MD, error)
	// Recv returns the next message, or at the stream's end io.EOF (OK) or
	// its status error.
	Recv() ([]byte, error)
	// Trailer returns the stream's trailer once Recv has returned an error.
	Trailer() metadata.MD
}

// Sourced is an Upstream that says where it comes from: every Reader of its
// record returns what Source returned (Reader.Source), so that a caller can
// name the stream it read though it did not open it. The proxy gives the
// span of the caller that opened it, which the spans of the others link to.
// Keep it small, a pointer to a small value: a kept record holds it, and
// counts the value's own bytes (what the pointer points to), not what those
// point to in turn.
type Sourced interface {
	Source() any
}

// Aged is an Upstream that says, once Recv has returned an error, how long
// its record may be kept for replay at most: what is left of the life of
// the record it copies (another Streams' Reader.Left, told by the proxy
// of a peer), or 0 for a stream that must not be kept. The record is kept
// for the lesser of that and its TTL (Streams.Join): a copy never outlives
// what it copies. When ok is false the upstream says nothing, and the
// record is kept for its TTL.
type Aged interface {
	Left() (left time.Duration, ok bool)
}

// Open starts the upstream of a record under ctx, which belongs to no
// caller and ends when the last reader leaves (Refreshing: for a record
// that refreshes a kept one, when that one goes).
type Open func(ctx context.Context) (Upstream, error)

// Life is how long a record whose stream ended well is kept, and whether
// it is refreshed before it goes.
type Life struct {
	// TTL is how long it is kept (0: not at all), or less when its
	// upstream says so (Aged).
	TTL time.Duration
	// EarlyRefresh: the first Join at or after the record's point on the
	// key's refresh grid (collapse.RefreshPoint, drawn from Hash) starts a
	// new record of the key in the background, read by no caller, which
	// replaces the kept one once its stream ended well within its bounds;
	// until then, and if it fails, the kept one is served. One refresh per
	// record; a refresh is cancelled when the record it refreshes goes
	// (its life is over, or a purge took it back). Off for a copy of
	// another cache's record: that cache refreshes the original.
	EarlyRefresh bool
	// Hash is the key's hash, which draws its refresh grid.
	Hash uint64
}

// refreshing marks the context a refresh's upstream is opened under.
type refreshing struct{}

// Refreshing reports whether ctx, an Open's, is that of a record that
// refreshes a kept one (Life.EarlyRefresh).
func Refreshing(ctx context.Context) bool { return ctx.Value(refreshing{}) != nil }

// Outcome says how a caller of Join was served.
type Outcome uint8

const (
	// Lead means this caller started the record.
	Lead Outcome = iota + 1
	// Join means this caller joined a live record.
	Join
	// Replay means this caller got a kept, ended record, replayed whole.
	Replay
	// Own means the key's record takes no new reader (it outgrew its bounds,
	// or its header is private): the caller must make a stream of its own.
	Own
)

// String returns the outcome's metric label: "leader", "joined",
// "replayed" or "own".
func (o Outcome) String() string {
	switch o {
	case Lead:
		return "leader"
	case Join:
		return "joined"
	case Replay:
		return "replayed"
	case Own:
		return "own"
	}
	return "unknown"
}

// Outcomes lists every Outcome, for metrics that export each one up front.
var Outcomes = []Outcome{Lead, Join, Replay, Own}

// Stats is a snapshot of the streams' state, for gauges.
type Stats struct {
	// Live is the number of records reading their upstream, their key's or
	// not (detached by a purge, or left by their last reader).
	Live int
	// Held is the number of ended records kept for replay.
	Held int
	// Readers is the number of callers reading a record.
	Readers int
	// Bytes is what the records hold, live and kept.
	Bytes int64
}
