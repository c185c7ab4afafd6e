package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The windows of the greetings the coherence tests read: how long an answer
// may be served after the backend produced it is ttl plus the longer of
// the stale windows. An answer outlives a replica's lease
// (coherence.Lease), as most do: a replica cut off for a lease still holds
// answers a purge took back meanwhile.
const (
	coherentTTL = 15 * time.Second
	coherentSWR = 3 * time.Second
	coherentSIE = 5 * time.Second
)

// store is the one database behind every replica's backend: greetings by
// name, each write a new version. It numbers its calls, and records for each
// read call when it started, on the test's logical clock (a counter every
// operation and call ticks, so that "ended before ... started" is an order)
// and on its fake clock.
type store struct {
	tick  *atomic.Int64
	clock *testkit.Clock

	mu       sync.Mutex
	versions map[string]int64
	reads    map[int64]produced // by call number
	calls    int64
}

// produced is when a read call started.
type produced struct {
	tick    int64
	at      time.Time
	replica int // whose backend
}

// storeBackend is one replica's backend in front of the store: GetGreeting
// reads, SetGreeting writes, both tagged greeting:<name>. failing makes it
// answer UNAVAILABLE, as a backend that is down would.
type storeBackend struct {
	hellov1.UnimplementedGreeterServer
	s       *store
	replica int
	failing atomic.Bool
}

func (b *storeBackend) GetGreeting(ctx context.Context, req *hellov1.GetGreetingRequest) (*hellov1.Greeting, error) {
	if b.failing.Load() {
		return nil, status.Error(codes.Unavailable, "the backend is down")
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs("collapser-tags", "greeting:"+req.GetName())); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.reads[s.calls] = produced{tick: s.tick.Add(1), at: s.clock.Now(), replica: b.replica}
	return &hellov1.Greeting{Name: req.GetName(), Text: strconv.FormatInt(s.calls, 10), Version: s.versions[req.GetName()]}, nil
}

func (b *storeBackend) SetGreeting(ctx context.Context, req *hellov1.Greeting) (*hellov1.Greeting, error) {
	if b.failing.Load() {
		return nil, status.Error(codes.Unavailable, "the backend is down")
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs("collapser-tags", "greeting:"+req.GetName())); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[req.GetName()]++
	return &hellov1.Greeting{Name: req.GetName(), Text: req.GetText(), Version: s.versions[req.GetName()]}, nil
}

// coherentReplica is one replica of the coherence tests: its backend, its
// sidecar, the relay in front of its peer listener (what the others reach
// it through), a client and an admin client.
type coherentReplica struct {
	backend *storeBackend
	sidecar *runningSidecar
	relay   *testkit.Relay
	client  hellov1.GreeterClient
	admin   adminv1.CacheClient
}

// startCoherentReplicas starts n replicas in front of one store, peered
// through relays, with a peer token, on the store's clock; they sync only
// when the test says (syncAll).
func startCoherentReplicas(t *testing.T, n int, s *store, log *logrecorder.Recorder) []*coherentReplica {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	file := fmt.Sprintf("methods:\n  - name: %s\n    cacheTTL: %v\n    staleWhileRevalidate: %v\n    staleIfError: %v\n  - name: %s\n    invalidates:\n      responseTags: true\n",
		getGreeting, coherentTTL, coherentSWR, coherentSIE, setGreeting)
	if err := os.WriteFile(policy, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	token := testkit.SecretFile(t, releaseToken)
	certs := newRelease(t)
	rs := make([]*coherentReplica, n)
	peers := make([]net.Listener, n)
	relays := make([]string, n)
	for i := range rs {
		peers[i] = testkit.Listen(t, "127.0.0.1:0")
		relay := testkit.NewRelay(t, peers[i].Addr().String())
		rs[i] = &coherentReplica{backend: &storeBackend{s: s, replica: i}, relay: relay}
		relays[i] = relay.Addr()
	}
	for i, r := range rs {
		srv := grpc.NewServer()
		hellov1.RegisterGreeterServer(srv, r.backend)
		reflection.Register(srv)
		lis := testkit.Listen(t, "127.0.0.1:0")
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		r.sidecar = startSidecar(t, lis.Addr().String(), func(c *config.Settings) {
			c.PolicyFile = policy
			c.Peers = strings.Join(relays, ",")
			c.PeerListen = relays[i] // how the others know it, and it knows itself
			c.PeerTokenFile = token
			certs.certify(t, c)
			// A call forwarded to a replica cut off ends soon: the test
			// waits for every call before it moves the clock.
			c.Policy.Timeout = 200 * time.Millisecond
		}, peerListener(peers[i]), withSeams(seams{now: s.clock.Now, syncEvery: time.Hour}), logTo(slog.New(log)))
		r.client = hellov1.NewGreeterClient(dial(t, r.sidecar.addr, grpc.WithAuthority("hello.example")))
		r.admin = adminv1.NewCacheClient(dial(t, r.sidecar.adminAddr))
	}
	return rs
}

// A read of the coherence tests, and what it got.
type coherentRead struct {
	start, end int64     // on the logical clock
	at         time.Time // the fake clock's time during the read
	replica    int
	name       string
	call       int64 // the backend read call that produced the answer
	version    int64
}

// A purge of the coherence tests, or a write (whose success purges the
// greeting's tag on every replica), once it returned OK.
type coherentPurge struct {
	start, end int64     // on the logical clock
	endAt      time.Time // the fake clock's time when it returned
	replica    int
	what       string // "write", "request", "method" or "tag"
	name       string // the greeting it takes back ("" for every one: method)
	soft       bool
	version    int64 // a write's
	missed     []string
}

// takesBack reports whether p took back the answers of name.
func (p coherentPurge) takesBack(name string) bool { return p.name == "" || p.name == name }

// coherenceRun is one randomized run: the replicas, the model's history
// and what the run is made of.
type coherenceRun struct {
	t     *testing.T
	rng   *rand.Rand
	tick  atomic.Int64
	clock *testkit.Clock
	store *store
	rs    []*coherentReplica
	log   logrecorder.Recorder // what the replicas logged
	names []string

	mu     sync.Mutex
	reads  []coherentRead
	purges []coherentPurge
	failed int            // reads and long operations that ended with an error
	errs   map[string]int // their codes

	long    sync.WaitGroup // writes and purges, which may wait for the clock
	syncs   sync.WaitGroup // the replicas' Syncs
	syncing []atomic.Bool  // a replica's Sync runs

	// Guarded by the run's goroutine.
	cut  []int // by replica, the steps it stays cut off from the others; 0: not cut
	down []int // by replica, the steps its backend stays down; 0: up
	ops  map[string]int
}

func newCoherenceRun(t *testing.T, seed uint64) *coherenceRun {
	r := &coherenceRun{t: t, rng: rand.New(rand.NewPCG(seed, seed)), clock: testkit.NewClock(time.Unix(1e9, 0)),
		names: []string{"ann", "bob", "cid", "dee"}, ops: map[string]int{}, errs: map[string]int{}}
	r.store = &store{tick: &r.tick, clock: r.clock, versions: map[string]int64{}, reads: map[int64]produced{}}
	r.rs = startCoherentReplicas(t, 3, r.store, &r.log)
	r.cut, r.down = make([]int, len(r.rs)), make([]int, len(r.rs))
	r.syncing = make([]atomic.Bool, len(r.rs))
	return r
}

// step runs one random step: a burst of reads, a write, a purge, time
// passing, a backend going down for a few steps, or a replica cut off for a
// few (time passes a second a step meanwhile, so that leases run out); then
// the replicas that can sync do.
func (r *coherenceRun) step() {
	switch n := r.rng.IntN(100); {
	case n < 55:
		r.readBurst(1 + r.rng.IntN(6))
	case n < 63:
		r.ops["write"]++
		r.startLong(r.write(r.rng.IntN(len(r.rs)), r.names[r.rng.IntN(len(r.names))]))
	case n < 73:
		r.ops["purge"]++
		r.startLong(r.purge(r.rng.IntN(len(r.rs)), r.names[r.rng.IntN(len(r.names))], r.rng.IntN(3), r.rng.IntN(2) == 0))
	case n < 95:
		r.ops["time"]++
		r.advance(time.Duration(r.rng.IntN(1500)) * time.Millisecond)
	case n < 98:
		if i := r.rng.IntN(len(r.rs)); r.down[i] == 0 {
			r.ops["backend down"]++
			r.down[i] = 1 + r.rng.IntN(10)
			r.rs[i].backend.failing.Store(true)
		}
	default:
		if i := r.rng.IntN(len(r.rs)); !slices.ContainsFunc(r.cut, func(n int) bool { return n > 0 }) {
			r.ops["replica cut off"]++
			r.cut[i] = 5 + r.rng.IntN(20)
			r.rs[i].relay.Cut()
		}
	}
	for i := range r.rs {
		if r.down[i] > 0 {
			if r.down[i]--; r.down[i] == 0 {
				r.rs[i].backend.failing.Store(false)
			}
		}
		if r.cut[i] > 0 {
			r.advance(time.Second)
			if r.cut[i]--; r.cut[i] == 0 {
				r.rs[i].relay.Heal()
			}
		}
	}
	r.syncAll()
}

// readBurst reads n random greetings through random replicas at once.
func (r *coherenceRun) readBurst(n int) {
	var wg sync.WaitGroup
	for range n {
		i, name := r.rng.IntN(len(r.rs)), r.names[r.rng.IntN(len(r.names))]
		wg.Go(func() {
			read := coherentRead{start: r.tick.Add(1), at: r.clock.Now(), replica: i, name: name}
			ctx, cancel := r.opContext()
			defer cancel()
			g, err := r.rs[i].client.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: name})
			read.end = r.tick.Add(1)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.failed++
				r.errs[status.Code(err).String()+" read"]++
				return
			}
			read.call, _ = strconv.ParseInt(g.GetText(), 10, 64)
			read.version = g.GetVersion()
			r.reads = append(r.reads, read)
		})
	}
	wg.Wait()
	r.ops["read"] += n
}

// opContext returns the context of one operation: bounded, and ended
// with the test.
func (r *coherenceRun) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.t.Context(), testkit.DefaultTimeout)
}

// startLong runs op, a write or a purge, beside the next steps: one that
// waits for a replica cut off returns once the clock has run its lease
// out.
func (r *coherenceRun) startLong(op func() (coherentPurge, error)) {
	r.long.Go(func() {
		p, err := op()
		p.end, p.endAt = r.tick.Add(1), r.clock.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.failed++
			r.errs[status.Code(err).String()+" "+p.what]++
			return
		}
		r.purges = append(r.purges, p)
	})
}

// write returns a write of name's greeting through replica i.
func (r *coherenceRun) write(i int, name string) func() (coherentPurge, error) {
	return func() (coherentPurge, error) {
		p := coherentPurge{start: r.tick.Add(1), replica: i, what: "write", name: name}
		ctx, cancel := r.opContext()
		defer cancel()
		g, err := r.rs[i].client.SetGreeting(ctx, &hellov1.Greeting{Name: name, Text: "w"})
		p.version = g.GetVersion()
		return p, err
	}
}

// purge returns a purge through replica i's admin service, hard or soft,
// of name's greeting (by request, kind 0, or by tag, kind 2) or of every
// one (by method, kind 1).
func (r *coherenceRun) purge(i int, name string, kind int, soft bool) func() (coherentPurge, error) {
	return func() (coherentPurge, error) { return r.purgeNow(i, name, kind, soft) }
}

// purgeNow is purge's call.
func (r *coherenceRun) purgeNow(i int, name string, kind int, soft bool) (coherentPurge, error) {
	p := coherentPurge{replica: i, name: name, soft: soft}
	req := &adminv1.PurgeRequest{Soft: p.soft}
	switch kind {
	case 0:
		payload, err := proto.Marshal(&hellov1.GetGreetingRequest{Name: name})
		if err != nil {
			return p, err
		}
		p.what = "request"
		req.Selector = &adminv1.PurgeRequest_Request{Request: &adminv1.Request{Method: getGreeting, Payload: payload,
			Headers: []*adminv1.Header{{Name: ":authority", Values: []string{"hello.example"}}}}}
	case 1:
		p.what, p.name = "method", ""
		req.Selector = &adminv1.PurgeRequest_Method{Method: getGreeting}
	default:
		p.what = "tag"
		req.Selector = &adminv1.PurgeRequest_Tag{Tag: "greeting:" + name}
	}
	p.start = r.tick.Add(1)
	ctx, cancel := r.opContext()
	defer cancel()
	resp, err := r.rs[i].admin.Purge(ctx, req)
	p.missed = resp.GetMissed()
	return p, err
}

// advance moves the fake clock d on, once no call is in flight anywhere.
func (r *coherenceRun) advance(d time.Duration) {
	scs := make([]*runningSidecar, len(r.rs))
	for i, rep := range r.rs {
		scs[i] = rep.sidecar
	}
	advance(r.t, r.clock, d, scs...)
}

// syncAll starts a Sync of every replica that is not cut off and is not
// syncing already.
func (r *coherenceRun) syncAll() {
	for i, rep := range r.rs {
		if r.cut[i] == 0 && r.syncing[i].CompareAndSwap(false, true) {
			r.syncs.Go(func() {
				defer r.syncing[i].Store(false)
				ctx, cancel := r.opContext()
				defer cancel()
				rep.sidecar.replicas.Sync(ctx)
			})
		}
	}
}

// finish heals every replica and lets the writes and purges end, moving
// the clock until they have.
func (r *coherenceRun) finish() {
	for i := range r.rs {
		r.cut[i], r.down[i] = 0, 0
		r.rs[i].relay.Heal()
		r.rs[i].backend.failing.Store(false)
	}
	done := make(chan struct{})
	go func() { r.long.Wait(); close(done) }()
	testkit.WaitFor(r.t, "the writes and purges to end", func() bool {
		select {
		case <-done:
			return true
		default:
			r.advance(100 * time.Millisecond)
			r.syncAll()
			return false
		}
	})
	r.syncs.Wait()
}

// check holds every read against the model and returns the violations: an
// answer served past its life, one a purge that returned before the read
// started took back, or a write's OK before the read started not seen.
func (r *coherenceRun) check() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	life := coherentTTL + max(coherentSWR, coherentSIE)
	var bad []string
	for _, rd := range r.reads {
		prod := r.store.reads[rd.call]
		if age := rd.at.Sub(prod.at); age > life {
			bad = append(bad, fmt.Sprintf("read of %s through replica %d at %v served call %d produced %v earlier, past its life of %v", rd.name, rd.replica, rd.at.Sub(time.Unix(1e9, 0)), rd.call, age, life))
		}
		for _, p := range r.purges {
			if p.end >= rd.start || !p.takesBack(rd.name) {
				continue
			}
			switch {
			case p.what == "write" && rd.version < p.version:
				bad = append(bad, fmt.Sprintf("read of %s through replica %d got version %d after a write of version %d through replica %d returned (read ticks %d-%d got call %d produced at tick %d; write ticks %d-%d, missed %v)",
					rd.name, rd.replica, rd.version, p.version, p.replica, rd.start, rd.end, rd.call, prod.tick, p.start, p.end, p.missed))
			case prod.tick > p.start:
			case !p.soft:
				bad = append(bad, fmt.Sprintf("read of %s through replica %d got call %d, which a %s purge through replica %d took back before the read started (read ticks %d-%d at %v; call by replica %d at tick %d; purge ticks %d-%d ending at %v, missed %v)",
					rd.name, rd.replica, rd.call, p.what, p.replica, rd.start, rd.end, rd.at.Sub(time.Unix(1e9, 0)), prod.replica, prod.tick, p.start, p.end, p.endAt.Sub(time.Unix(1e9, 0)), p.missed))
			case rd.at.Sub(p.endAt) >= max(coherentSWR, coherentSIE):
				bad = append(bad, fmt.Sprintf("read of %s through replica %d got call %d, which a soft %s purge through replica %d took back %v before, past its stale windows", rd.name, rd.replica, rd.call, p.what, p.replica, rd.at.Sub(p.endAt)))
			}
		}
	}
	return bad
}

// coherenceSteps is how many steps each seed's run takes;
// COLLAPSER_COHERENCE_STEPS changes it.
const coherenceSteps = 600

func TestCoherence_ThreeReplicasKeepEveryPromiseOneSidecarMakes(t *testing.T) {
	steps := coherenceSteps
	if v := os.Getenv("COLLAPSER_COHERENCE_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("COLLAPSER_COHERENCE_STEPS=%q: %v", v, err)
		}
		steps = n
	}
	seeds := []uint64{1, 2, 3}
	if v := os.Getenv("COLLAPSER_COHERENCE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("COLLAPSER_COHERENCE_SEED=%q: %v", v, err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := newCoherenceRun(t, seed)
			for range steps {
				r.step()
			}
			r.finish()
			bad := r.check()
			missed := 0
			for _, p := range r.purges {
				missed += len(p.missed)
			}
			t.Logf("seed %d: %d steps %v; %d reads and %d writes and purges checked (%d replicas waited out), %d failed %v; %d backend reads; %d purges on write failed",
				seed, steps, r.ops, len(r.reads), len(r.purges), missed, r.failed, r.errs, len(r.store.reads), r.log.Count(slog.LevelWarn, "purge on write failed", "", ""))
			for i, b := range bad {
				if i == 10 {
					t.Errorf("... and %d more", len(bad)-i)
					break
				}
				t.Error(b)
			}
		})
	}
}
