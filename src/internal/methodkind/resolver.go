package methodkind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const (
	// DefaultRefreshInterval is the minimum time between reflection refreshes
	// when Options.RefreshInterval is 0.
	DefaultRefreshInterval = 10 * time.Second
	// refreshTimeout bounds one reflection refresh.
	refreshTimeout = 10 * time.Second
	// firstRetryDelay is the wait before retrying a failed refresh (the
	// backend may start after the sidecar); it doubles up to the interval.
	firstRetryDelay = 100 * time.Millisecond
)

// Options configures a Resolver. Explicit sources (DescriptorSetPath,
// UnaryMethods) win over reflection when they disagree.
type Options struct {
	// Backend is asked for server reflection when UseReflection is set.
	Backend grpc.ClientConnInterface
	// UseReflection makes Run learn kinds from the backend's server reflection.
	UseReflection bool
	// DescriptorSetPath names a binary FileDescriptorSet; "" = none.
	DescriptorSetPath string
	// UnaryMethods lists full method names ("/pkg.Service/Method") to treat as unary.
	UnaryMethods []string
	// Files, when set, are descriptors the process has itself (a Go
	// program's generated code registers its own in
	// protoregistry.GlobalFiles): every method of their services is known,
	// as from a descriptor set. The library reads its own process's.
	Files *protoregistry.Files
	// RefreshInterval is the minimum time between reflection refreshes;
	// 0 = DefaultRefreshInterval.
	RefreshInterval time.Duration
	// Logger receives the resolver's logs; nil = discard.
	Logger *slog.Logger
}

// Resolver answers what is known of a method. Method is safe for concurrent
// use and never blocks; Run keeps what reflection teaches up to date.
type Resolver struct {
	explicit      map[string]Method                 // from DescriptorSetPath and UnaryMethods; read-only after NewResolver
	learned       atomic.Pointer[map[string]Method] // from reflection; the map is never modified, only replaced
	generation    atomic.Uint64                     // how many times learned was replaced (Generation)
	backend       grpc.ClientConnInterface
	useReflection bool
	interval      time.Duration
	logger        *slog.Logger
	wake          chan struct{} // capacity 1: Method asks Run for a refresh
	// settled is set once reflection has answered (with the kinds, or that
	// the backend serves none), or at once without UseReflection.
	settled atomic.Bool
}

// NewResolver loads the descriptor set and the unary method list now; errors
// name the bad input.
func NewResolver(o Options) (*Resolver, error) {
	if o.UseReflection && o.Backend == nil {
		return nil, errors.New("methodkind: UseReflection needs a Backend")
	}
	if o.RefreshInterval < 0 {
		return nil, fmt.Errorf("methodkind: RefreshInterval %v is negative", o.RefreshInterval)
	}
	explicit, err := explicitKinds(o.DescriptorSetPath, o.Files, o.UnaryMethods)
	if err != nil {
		return nil, err
	}
	r := &Resolver{
		explicit:      explicit,
		backend:       o.Backend,
		useReflection: o.UseReflection,
		interval:      o.RefreshInterval,
		logger:        o.Logger,
		wake:          make(chan struct{}, 1),
	}
	if r.interval == 0 {
		r.interval = DefaultRefreshInterval
	}
	r.settled.Store(!o.UseReflection)
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Method returns what is known of fullMethod ("/pkg.Service/Method"); its
// Kind is Unknown when nothing is. It never blocks. An unknown method wakes
// Run to ask reflection again. The explicit sources win over reflection,
// but a method they name without describing it (UnaryMethods) takes its
// Request from reflection, where reflection agrees on its kind.
func (r *Resolver) Method(fullMethod string) Method {
	var learned Method
	var known bool
	if l := r.learned.Load(); l != nil {
		learned, known = (*l)[fullMethod]
	}
	if m, ok := r.explicit[fullMethod]; ok {
		if m.Request == nil && known && learned.Kind == m.Kind {
			// Listed by name only: reflection describes its request.
			m.Request = learned.Request
		}
		return m
	}
	if known {
		return learned
	}
	select {
	case r.wake <- struct{}{}:
	default: // a refresh is already requested
	}
	return Method{}
}

// Ready returns nil once what reflection teaches is known: the backend
// answered it (or said it serves no reflection, or answered with an error
// of another kind than a connection's), or reflection is not used.
// Until then a call of a method known from reflection only would pass
// through uncollapsed, so the sidecar is not ready.
func (r *Resolver) Ready() error {
	if r.settled.Load() {
		return nil
	}
	return errors.New("method kinds not learned from the backend's reflection yet: calls would pass through uncollapsed")
}

// Generation changes whenever what Method answers may have: it counts the
// times reflection's answer was replaced. It changes after the answer
// did, so that what was learned of a method under one generation is
// never older than that generation.
func (r *Resolver) Generation() uint64 {
	return r.generation.Load()
}

// Methods returns the names of every method known now, sorted.
func (r *Resolver) Methods() []string {
	names := slices.Collect(maps.Keys(r.explicit))
	if learned := r.learned.Load(); learned != nil {
		for m := range *learned {
			if _, ok := r.explicit[m]; !ok {
				names = append(names, m)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Run asks the backend's reflection now, then whenever Method is woken by an
// unknown method, at most once per RefreshInterval. A failed refresh (the
// backend may not be up yet) is retried with backoff. Run returns when ctx
// ends; without UseReflection it only waits for that.
func (r *Resolver) Run(ctx context.Context) {
	if !r.useReflection {
		<-ctx.Done()
		return
	}
	timer := time.NewTimer(0) // the first refresh is immediate
	defer timer.Stop()
	due := time.Now()  // when timer fires
	pending := true    // a refresh is due when timer fires
	var next time.Time // earliest start of the next refresh after a success
	retry := firstRetryDelay
	retrying := false           // the previous refresh failed
	noReflectionLogged := false // the backend's missing reflection was reported
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			switch {
			case !pending:
				pending = true
				due = next
				timer.Reset(time.Until(due))
			case retrying && time.Until(due) > firstRetryDelay:
				// A call is waiting for what reflection would teach: try
				// again soon rather than at the end of a long backoff.
				retry = firstRetryDelay
				due = time.Now().Add(retry)
				timer.Reset(retry)
			}
		case <-timer.C:
			err := r.refresh(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil && answered(err) && !errors.Is(err, errNoReflection) {
				// The backend answered, but not with kinds it can teach: wait
				// no longer for them to be ready; its methods pass through.
				r.settled.Store(true)
			}
			if err != nil && !errors.Is(err, errNoReflection) {
				if retrying {
					r.logger.Debug("backend reflection still failing", "error", err, "retry_in", retry)
				} else {
					r.logger.Info("cannot learn method kinds from backend reflection yet; retrying", "error", err)
				}
				retrying = true
				due = time.Now().Add(retry)
				timer.Reset(retry)
				retry = min(2*retry, r.interval)
				continue
			}
			if err != nil && !noReflectionLogged {
				noReflectionLogged = true
				r.logger.Warn("method kinds cannot be learned: "+err.Error(), "hint",
					"enable server reflection on the backend, or set COLLAPSER_COLLAPSE_METHODS or COLLAPSER_DESCRIPTOR_SET")
			}
			r.settled.Store(true)
			retrying = false
			retry = firstRetryDelay
			pending = false
			next = time.Now().Add(r.interval)
		}
	}
}

// answered reports whether a failed refresh reached the backend: not
// when the connection is down or the backend too slow.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}

// refresh replaces what was learned with what reflection reports now. It
// logs only a change of kinds or idempotency levels: the Requests are new
// descriptors at every refresh.
func (r *Resolver) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	kinds, version, err := fetchKinds(ctx, r.backend)
	if err != nil {
		return err
	}
	old := r.learned.Swap(&kinds)
	r.generation.Add(1)
	if old != nil && maps.EqualFunc(*old, kinds, sameKind) {
		return nil
	}
	r.logger.Info("learned method kinds from backend reflection", "methods", len(kinds), "reflection", version)
	for m, k := range kinds {
		if e, ok := r.explicit[m]; ok && e.Kind != k.Kind {
			r.logger.Warn("explicit method kind overrides backend reflection",
				"method", m, "explicit", e.Kind.String(), "reflection", k.Kind.String())
		}
	}
	return nil
}

// sameKind reports whether a and b tell the same kind and idempotency level,
// whatever their Requests.
func sameKind(a, b Method) bool {
	return a.Kind == b.Kind && a.Idempotency == b.Idempotency
}
