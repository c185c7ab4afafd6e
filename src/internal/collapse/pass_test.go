package collapse

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/testkit"
)

// isPrivate is the Private option of the pass tests: values starting with
// "private" may not be shared.
func isPrivate(v string) bool { return strings.HasPrefix(v, "private") }

func TestGroup_AfterAPrivateAnswerCallersDoNotWaitForOneAnother(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{Private: isPrivate})
	opts := &CallOptions{TTL: time.Hour}
	if r := do(g, "k", opts, value("private:1", nil)); r != (result{"private:1", Lead, nil}) {
		t.Fatalf("first call: %+v", r)
	}
	// The next caller's call is a pass call: while it runs, the key's other
	// callers make calls of their own at once, rather than wait for an
	// answer they most likely could not share.
	call := newGate("private:2", nil)
	pass := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the pass call to start", call.started)
	var own atomic.Int64
	for range 3 {
		if r := do(g, "k", opts, value("private:own", &own)); r != (result{"private:own", Pass, nil}) {
			t.Errorf("caller during the pass call: %+v, want its own call's value, outcome pass", r)
		}
	}
	if st := g.Stats(); st.Waiters != 1 {
		t.Errorf("waiters = %d, want 1: the pass call's own caller", st.Waiters)
	}
	close(call.release)
	if r := testkit.Recv(t, "the pass call's result", pass); r != (result{"private:2", Lead, nil}) {
		t.Errorf("pass call: %+v", r)
	}
	if call.calls.Load() != 1 || own.Load() != 3 {
		t.Errorf("calls = %d pass, %d own; want 1 and 3", call.calls.Load(), own.Load())
	}
}

func TestGroup_AShareableAnswerEndsThePassMarker(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{Private: isPrivate})
	opts := &CallOptions{TTL: time.Hour}
	do(g, "k", opts, value("private", nil))
	// The pass call's answer may be shared: it is kept, as any result.
	if r := do(g, "k", opts, value("public", nil)); r != (result{"public", Lead, nil}) {
		t.Fatalf("pass call: %+v", r)
	}
	clock.Add(int64(time.Minute))
	if r := do(g, "k", opts, value("later", nil)); r != (result{"public", Hit, nil}) {
		t.Errorf("after a shareable pass call: %+v, want its value as a hit", r)
	}
	// Its followers share it again: the key is an ordinary key.
	call := newGate("shared", nil)
	clock.Add(int64(time.Hour))
	leader := doAsync(g, context.Background(), "k", opts, call.fn)
	testkit.Recv(t, "the call to start", call.started)
	follower := doAsync(g, context.Background(), "k", opts, call.fn)
	waitWaiters(t, g, 2)
	close(call.release)
	for _, c := range []<-chan result{leader, follower} {
		if r := testkit.Recv(t, "a caller's result", c); r.val != "shared" {
			t.Errorf("caller got %+v, want the shared value", r)
		}
	}
	if call.calls.Load() != 1 {
		t.Errorf("calls = %d, want 1", call.calls.Load())
	}
}

func TestGroup_PassMarkerLastsItsTTLAndIsCounted(t *testing.T) {
	g, clock := newTestGroup(t, Options[string]{Private: isPrivate, PassTTL: time.Minute})
	do(g, "k", &CallOptions{TTL: time.Hour}, value("private", nil))
	if st := g.Stats(); st.Entries != 1 || st.Bytes != heapsize.String("k")+EntryOverhead {
		t.Errorf("stats with a pass marker = %+v, want 1 entry of %d bytes", st, heapsize.String("k")+EntryOverhead)
	}
	// A purge takes answers back: the marker holds none, and stays.
	if g.Purge("k", false) {
		t.Error("Purge took back a pass marker as if it were an answer")
	}
	if n := g.PurgeMatching(func(string, string) bool { return true }, func(string) bool { return true }, false); n != 0 {
		t.Errorf("PurgeMatching took back %d, want 0", n)
	}
	clock.Store(int64(time.Minute))
	if st := g.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("stats after the pass TTL = %+v, want nothing held", st)
	}
}

func TestGroup_PassMarkersAreBoundedWithResults(t *testing.T) {
	g, _ := newTestGroup(t, Options[string]{Private: isPrivate, Limits: Limits{MaxEntries: 2}})
	opts := &CallOptions{TTL: time.Hour}
	for _, k := range []string{"a", "b", "c"} {
		do(g, k, opts, value("private", nil))
	}
	if st := g.Stats(); st.Entries != 2 {
		t.Errorf("entries = %d after 3 pass markers, want MaxEntries 2", st.Entries)
	}
}
