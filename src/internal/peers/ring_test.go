package peers

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"

	"github.com/collapser/collapser/src/internal/testkit"
)

// dialRings returns one Ring per address, each knowing its own address as
// its peer listener's, all with the same list.
func dialRings(t *testing.T, addrs []string) []*Ring {
	t.Helper()
	var rings []*Ring
	for _, self := range addrs {
		r, err := Dial(strings.Join(addrs, ","), self, plain)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rings = append(rings, r)
	}
	return rings
}

// checkOwners makes a call of every key on every ring (which connects to
// its owner) and checks that each ring sends it to the same owner, and
// that Owner says it is self, known, on exactly that owner's own ring. It
// returns each key's owner.
func checkOwners(t *testing.T, rings []*Ring, addrs []string, keys []string) map[string]string {
	t.Helper()
	owners := map[string]string{}
	for _, key := range keys {
		want := owner(t, rings[0].ClientConn, key)
		for i, r := range rings[1:] {
			if got := owner(t, r.ClientConn, key); got != want {
				t.Errorf("%s: ring %d sends it to %s, ring 0 to %s", key, i+1, got, want)
			}
		}
		owners[key] = want
	}
	for _, key := range keys {
		for i, r := range rings {
			if self, known := r.Owner(KeyHash([]byte(key))); !known || self != (owners[key] == addrs[i]) {
				t.Errorf("%s: ring %d (%s) Owner = %v, known %v; want %v, known (owner %s)", key, i, addrs[i], self, known, owners[key] == addrs[i], owners[key])
			}
		}
	}
	return owners
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("key-", i)
	}
	return out
}

func TestRing_OwnsExactlyTheKeysGRPCsPickSendsToItself(t *testing.T) {
	addrs := servePeers(t, 3)
	rings := dialRings(t, addrs)
	owners := checkOwners(t, rings, addrs, keys(60))
	per := map[string]int{}
	for _, o := range owners {
		per[o]++
	}
	if len(per) != 3 {
		t.Errorf("60 keys went to %d owners (%v), want all 3 to own some", len(per), per)
	}
	for i, r := range rings {
		if n := r.Members(); n != 3 {
			t.Errorf("ring %d: Members = %d, want 3", i, n)
		}
		if prev, _ := r.Previous(KeyHash([]byte("key-0"))); prev != nil {
			t.Errorf("ring %d: Previous is a connection, though its replicas never changed", i)
		}
	}
}

func TestRing_AReplicaThatDoesNotKnowItselfOwnsNothing(t *testing.T) {
	addrs := servePeers(t, 1)
	r, err := Dial(addrs[0], "127.0.0.1:0", plain) // no peer listens on port 0
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	owner(t, r.ClientConn, "key") // connected
	if self, known := r.Owner(KeyHash([]byte("key"))); self || !known {
		t.Errorf("Owner = %v, known %v, for a ring that lists no address of its own; want another's, known", self, known)
	}
}

func TestRing_TheOwnerOfAKeyIsNotKnownBeforeItsConnectionIsMade(t *testing.T) {
	r, err := Dial("127.0.0.1:1", "127.0.0.1:0", plain) // nothing listens on port 1
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if self, known := r.Owner(KeyHash([]byte("key"))); self || known {
		t.Errorf("Owner = %v, known %v before the owner's connection is made; want not known", self, known)
	}
}

// resolvedRings returns one Ring per address over a resolver each, with
// state, for the test to change their replicas.
func resolvedRings(t *testing.T, addrs []string, state resolver.State) ([]*Ring, []*testkit.Resolver) {
	t.Helper()
	var rings []*Ring
	var resolvers []*testkit.Resolver
	for i, self := range addrs {
		tr := testkit.NewResolver(fmt.Sprint("ringtest", i), state)
		r, err := Dial(tr.Scheme()+":///peers", self, plain, grpc.WithResolvers(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rings = append(rings, r)
		resolvers = append(resolvers, tr)
	}
	return rings, resolvers
}

func TestRing_EveryReplicaAgreesOnEachKeysOwnerAsOneJoinsAndLeaves(t *testing.T) {
	addrs := servePeers(t, 4)
	rings, resolvers := resolvedRings(t, addrs[:3], testkit.Endpoints(addrs[:3]...))
	ks := keys(200)
	before := checkOwners(t, rings, addrs[:3], ks)

	// The fourth replica starts, not ready: its resolver lists the three
	// others. Then it is ready, and every resolver lists all four.
	joined, joinedResolvers := resolvedRings(t, addrs[3:], testkit.Endpoints(addrs[:3]...))
	rings, resolvers = append(rings, joined...), append(resolvers, joinedResolvers...)
	for _, r := range resolvers {
		r.UpdateState(testkit.Endpoints(addrs...))
	}
	testkit.WaitFor(t, "every ring lists four replicas", func() bool {
		for _, r := range rings {
			if r.Members() != 4 {
				return false
			}
		}
		return true
	})
	after := checkOwners(t, rings, addrs, ks)
	toNew, between := 0, 0
	for _, k := range ks {
		switch after[k] {
		case before[k]:
		case addrs[3]:
			toNew++
		default:
			between++ // ring_hash's ring has 1,024 entries: each replica's share of them changes too
		}
	}
	t.Logf("of %d keys, %d moved to the fourth replica and %d between the three others", len(ks), toNew, between)
	// Every replica reaches each key's previous owner through Previous,
	// ready once its connection is made (asking makes it): the new one, the
	// ring the others had before it came; the others, the ring they had
	// before it changed. None asks itself.
	testkit.WaitFor(t, "every ring's previous owners connected", func() bool {
		for _, r := range rings {
			for _, k := range ks {
				if prev, ready := r.Previous(KeyHash([]byte(k))); prev != nil && !ready {
					return false
				}
			}
		}
		return true
	})
	for i, r := range rings {
		for _, k := range ks {
			previous, _ := r.Previous(KeyHash([]byte(k)))
			if previous == nil {
				if before[k] != addrs[i] {
					t.Errorf("%s: ring %d has no previous owner, want %s", k, i, before[k])
				}
				continue
			}
			if got := owner(t, previous, k); got != before[k] {
				t.Errorf("%s: ring %d's Previous reaches %s, want its owner before the fourth replica joined, %s", k, i, got, before[k])
			}
		}
	}
	if toNew < len(ks)/10 || toNew+between > len(ks)/2 {
		t.Errorf("%d keys moved to the new replica and %d between the others, want about a quarter in all", toNew, between)
	}

	// It leaves: its keys go back to the replicas that held them.
	for _, r := range resolvers[:3] {
		r.UpdateState(testkit.Endpoints(addrs[:3]...))
	}
	testkit.WaitFor(t, "every ring lists three replicas", func() bool {
		for _, r := range rings[:3] {
			if r.Members() != 3 {
				return false
			}
		}
		return true
	})
	if again := checkOwners(t, rings[:3], addrs[:3], ks); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Error("after the fourth replica left, the keys' owners differ from before it joined")
	}
}

func TestRing_ResolvesAgainEveryResolveInterval(t *testing.T) {
	addrs := servePeers(t, 1)
	tr := testkit.NewResolver("ringpoll", testkit.Endpoints(addrs...))
	r, err := Dial(tr.Scheme()+":///peers", addrs[0], plain, grpc.WithResolvers(tr))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// No call is made and no connection lost: only the balancer asks.
	testkit.WaitFor(t, "two resolutions asked", func() bool { return tr.Asked() >= 2 })
}
