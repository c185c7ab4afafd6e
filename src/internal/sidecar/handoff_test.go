package sidecar

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/resolver"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

// joiningFleet is three replicas serving, with a backend each, and a
// fourth ready to start: a rollout's new pod. Their peers are the ready
// replicas, which a resolver of the test's names (as a headless Service's
// DNS name does), and the replicas purges are taken to are all four.
type joiningFleet struct {
	f        *peerFleet
	ready    *testkit.Resolver
	rs       []*replica
	backends []*testkit.Greeter
	addrs    []string
	edit     func(*config.Settings)
}

// newJoiningFleet starts three replicas that collapse SayHello, keep its
// answers an hour and refresh none early; more edits their settings (and
// the fourth's) further.
func newJoiningFleet(t *testing.T, more ...func(*config.Settings)) *joiningFleet {
	f := newPeerFleet(t, 4)
	ready := testkit.NewResolver("ready"+strings.ToLower(rand.Text()), testkit.Endpoints(f.addrs[:3]...))
	resolver.Register(ready)
	j := &joiningFleet{f: f, ready: ready, edit: func(c *config.Settings) {
		c.Peers = ready.Scheme() + ":///peers"
		c.Replicas = strings.Join(f.addrs, ",")
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
		for _, edit := range more {
			edit(c)
		}
	}}
	for range 4 {
		b := &testkit.Greeter{SayHello: greet, StreamHellos: streamGreet}
		j.backends, j.addrs = append(j.backends, b), append(j.addrs, startBackend(t, b))
	}
	j.f.lis[3].Close()
	for i := range 3 {
		j.rs = append(j.rs, j.f.start(t, i, j.addrs[i], j.edit))
	}
	waitLeases(t, j.rs)
	return j
}

// join starts the fourth replica, makes it ready (every replica's
// resolver names it), and waits until every replica's ring puts each key
// on the same one.
func (j *joiningFleet) join(t *testing.T) *replica {
	j.f.lis[3] = testkit.Listen(t, j.f.addrs[3])
	j.rs = append(j.rs, j.f.start(t, 3, j.addrs[3], j.edit))
	j.ready.UpdateState(testkit.Endpoints(j.f.addrs...))
	waitOwners(t, j.rs, 3)
	waitLeases(t, j.rs)
	return j.rs[3]
}

// joinSeenByOthersFirst starts the fourth replica and makes it ready in
// the others' rings, but not yet in its own, as when it resolves the
// replicas a little later than they do: its own resolver still names the
// three others alone. It waits until the others' rings agree on each
// key's owner, the new replica one of them.
func (j *joiningFleet) joinSeenByOthersFirst(t *testing.T) *replica {
	own := testkit.NewResolver("own"+strings.ToLower(rand.Text()), testkit.Endpoints(j.f.addrs[:3]...))
	resolver.Register(own)
	j.f.lis[3] = testkit.Listen(t, j.f.addrs[3])
	joined := j.f.start(t, 3, j.addrs[3], func(c *config.Settings) {
		j.edit(c)
		c.Peers = own.Scheme() + ":///peers"
	})
	j.ready.UpdateState(testkit.Endpoints(j.f.addrs...))
	testkit.WaitFor(t, "the others' rings agree on each key's owner, the new replica one of them", func() bool {
		moved := 0
		for h := range 200 {
			owners := 0
			for _, r := range j.rs {
				if owns(r, fmt.Sprint(h)) {
					owners++
				}
			}
			if owners > 1 || owns(joined, fmt.Sprint(h)) {
				return false
			}
			if owners == 0 {
				moved++
			}
		}
		return moved > 0
	})
	j.rs = append(j.rs, joined)
	waitLeases(t, j.rs)
	return joined
}

// leave takes replica i out of the ready replicas (every resolver stops
// naming it, as a headless Service's DNS name does once a pod's preStop
// starts), and waits until the rings of the others put each key on one of
// them. Replica i serves on, as a pod does through its preStop.
func (j *joiningFleet) leave(t *testing.T, i int) []*replica {
	var stay []*replica
	var addrs []string
	for k, r := range j.rs {
		if k != i {
			stay, addrs = append(stay, r), append(addrs, j.f.addrs[k])
		}
	}
	j.ready.UpdateState(testkit.Endpoints(addrs...))
	waitOwners(t, stay, -1)
	return stay
}

// waitOwners waits until the rings of rs put each key on exactly one of
// them, and some keys on rs[owner] (none: -1).
func waitOwners(t *testing.T, rs []*replica, owner int) {
	t.Helper()
	testkit.WaitFor(t, "every ring agrees on each key's owner", func() bool {
		on := 0
		for h := range 200 {
			owners := 0
			for i, r := range rs {
				if owns(r, fmt.Sprint(h)) {
					owners++
					if i == owner {
						on++
					}
				}
			}
			if owners != 1 {
				return false
			}
		}
		return owner < 0 || on > 0
	})
}

// calls and streams sum the backends' own counts of SayHello calls and
// of StreamHellos streams.
func (j *joiningFleet) calls() int64 {
	return j.sum(func(b *testkit.Greeter) int64 { return b.Calls.SayHello.Load() })
}

func (j *joiningFleet) streams() int64 {
	return j.sum(func(b *testkit.Greeter) int64 { return b.Calls.StreamHellos.Load() })
}

func (j *joiningFleet) sum(count func(*testkit.Greeter) int64) int64 {
	var n int64
	for _, b := range j.backends {
		n += count(b)
	}
	return n
}

// read reads keys key-0 to key-(n-1) through r.
func read(t *testing.T, r *replica, n int) {
	t.Helper()
	for k := range n {
		if _, err := r.client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: fmt.Sprint("key-", k)}); err != nil {
			t.Fatalf("key-%d: %v", k, err)
		}
	}
}

// readStreams reads the streams of key-0 to key-(n-1), of two replies,
// through r.
func readStreams(t *testing.T, r *replica, n int) {
	t.Helper()
	for k := range n {
		name := fmt.Sprint("key-", k)
		if got := testkit.ReadStream(testkit.Context(t), r.client, &hellov1.HelloRequest{Name: name, Count: 2}); !consistent(got, 2, name) {
			t.Fatalf("%s: %d replies, %v; want 2 of one stream", name, len(got.Replies), got.Err)
		}
	}
}

// handoffTotals sums the handoffs of rs, by result.
func handoffTotals(t testing.TB, rs ...*replica) (taken, none, failed float64) {
	for _, r := range rs {
		taken, none, failed = taken+handoffs(t, r, "taken"), none+handoffs(t, r, "none"), failed+handoffs(t, r, "failed")
	}
	return taken, none, failed
}

// checkTakenOver checks what reading keys loaded before a change made: no
// backend call, and rs took some of them over, every replica asked holding
// the answer asked for. It returns how many rs took over.
func (j *joiningFleet) checkTakenOver(t *testing.T, keys int, rs ...*replica) float64 {
	t.Helper()
	taken, none, failed := handoffTotals(t, rs...)
	t.Logf("%d replicas took %v of %d keys over (none %v, failed %v); %d backend calls in all", len(rs), taken, keys, none, failed, j.calls())
	if got := j.calls(); got != int64(keys) {
		t.Errorf("reading the keys again made %d backend calls, want none", got-int64(keys))
	}
	if taken == 0 || none+failed != 0 {
		t.Errorf("handoffs taken %v, none %v, failed %v; want some taken, and every replica asked to hold its keys' answers", taken, none, failed)
	}
	return taken
}

// handoffs returns r's count of handoffs with result.
func handoffs(t testing.TB, r *replica, result string) float64 {
	return r.sidecar.metricSum(t, "collapser_handoffs_total", map[string]string{"result": result})
}

// A rollout's new pod owns keys the others held: it asks their previous
// owners for them, and makes no backend call for any of them.
func TestHandoff_AReplicaThatJoinsTakesItsKeysAnswersOverFromTheirPreviousOwners(t *testing.T) {
	// Fewer keys than a forwarding decision needs (forwarding.MinCalls):
	// every key is forwarded to its owner, which holds its answer.
	const keys = 40
	j := newJoiningFleet(t)
	read(t, j.rs[0], keys)
	if got := j.calls(); got != keys {
		t.Fatalf("loading %d keys made %d backend calls, want one each", keys, got)
	}

	joined := j.join(t)
	read(t, joined, keys)
	taken := j.checkTakenOver(t, keys, joined)
	// Taken over, the answers are the new replica's own: read again, they
	// are hits there, and its backend made no call.
	read(t, joined, keys)
	if got := j.backends[3].Calls.SayHello.Load(); got != 0 || handoffs(t, joined, "taken") != taken {
		t.Errorf("the new replica's backend made %d calls, and it asked for %v handoffs more; want none", got, handoffs(t, joined, "taken")-taken)
	}
}

// The others see a new pod before it sees itself: they forward it keys
// its own ring still puts on their previous owners, which it asks for them,
// and it makes no backend call for any of them.
func TestHandoff_AReplicaForwardedKeysBeforeItSeesItselfJoinAsksTheirOwners(t *testing.T) {
	const keys = 40
	j := newJoiningFleet(t)
	read(t, j.rs[0], keys)
	joined := j.joinSeenByOthersFirst(t)
	read(t, j.rs[1], keys) // replica 1 forwards the keys the new replica owns to it
	j.checkTakenOver(t, keys, joined)
}

// A pod that leaves serves on through its preStop: the replicas that own
// its keys now ask it for them, and make no backend call for any of them.
func TestHandoff_TheKeysOfAReplicaThatLeavesAreTakenOverFromIt(t *testing.T) {
	const keys = 40
	j := newJoiningFleet(t)
	read(t, j.rs[0], keys)
	stay := j.leave(t, 2)
	read(t, stay[1], keys) // replica 1 holds no copies: each key is asked of its owner
	j.checkTakenOver(t, keys, stay...)
}

// A replayed stream's record moves as an answer does: a rollout's new pod
// asks a key's previous owner for the record it keeps, and opens no
// backend stream for any key.
func TestHandoff_AReplicaThatJoinsTakesItsKeysRecordsOver(t *testing.T) {
	const keys = 30
	policy := replayPolicy(t, time.Hour)
	j := newJoiningFleet(t, func(c *config.Settings) { c.PolicyFile = policy })
	for _, r := range j.rs {
		waitStreamLearned(t, r.sidecar)
	}
	readStreams(t, j.rs[0], keys)
	if got := j.streams(); got != keys {
		t.Fatalf("loading %d keys opened %d backend streams, want one each", keys, got)
	}
	joined := j.join(t)
	waitStreamLearned(t, joined.sidecar)
	readStreams(t, joined, keys)
	taken, none, failed := handoffTotals(t, joined)
	t.Logf("the new replica took %v of %d records over (none %v, failed %v)", taken, keys, none, failed)
	if got := j.streams(); got != keys {
		t.Errorf("reading the keys again opened %d backend streams, want none", got-keys)
	}
	if taken == 0 || none+failed != 0 {
		t.Errorf("handoffs taken %v, none %v, failed %v; want some taken, and every replica asked to hold its keys' records", taken, none, failed)
	}
}

// A purge the new replica took may not have reached a previous owner yet:
// for a while after it, the new replica asks none, and makes its calls.
func TestHandoff_NoneIsAskedForSoonAfterAPurge(t *testing.T) {
	const keys = 40
	j := newJoiningFleet(t)
	read(t, j.rs[0], keys)
	joined := j.join(t)
	ctx, cancel := context.WithTimeout(testkit.Context(t), testkit.DefaultTimeout)
	defer cancel()
	if _, err := adminv1.NewCacheClient(dial(t, joined.sidecar.adminAddr)).Purge(ctx,
		&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "no-answer-has-it"}}); err != nil {
		t.Fatal(err)
	}
	read(t, joined, keys)
	asked := handoffs(t, joined, "taken") + handoffs(t, joined, "none") + handoffs(t, joined, "failed")
	if asked != 0 {
		t.Errorf("the new replica asked %v previous owners right after a purge, want none", asked)
	}
	if got := j.backends[3].Calls.SayHello.Load(); got == 0 {
		t.Error("the new replica's backend made no call: it took no key over, or did not make the calls itself")
	}
}

// owns reports whether r's ring knows r to own the key with hash.
func owns(r *replica, hash string) bool {
	self, _ := r.sidecar.fleet.Ring().Owner(hash)
	return self
}
