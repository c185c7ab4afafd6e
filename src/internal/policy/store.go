package policy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// ReloadInterval is how often a Store reads its file to look for changes.
// Reading it (rather than watching it) sees a Kubernetes ConfigMap update,
// which arrives as a symlink swap, like any other write.
const ReloadInterval = 2 * time.Second

// ReloadObserver is told the result of every reload of a changed file.
type ReloadObserver interface {
	ObservePolicyReload(ok bool)
}

// Store holds the policy in force and reloads its file when it changes. A
// valid new file replaces the policy atomically; an invalid one is logged
// and counted, and the policy in force stays.
type Store struct {
	defaults Defaults
	path     string
	kinds    Kinds // what a file's keyIgnoreFields are checked against; nil for nothing
	logger   *slog.Logger
	observer ReloadObserver
	current  atomic.Pointer[Policy]

	// Used by Run only.
	last    []byte // the file's content at the last read
	lastErr string // the last read or compile error, "" after a success
}

// NewStore compiles the policy of d and the file at path ("" for none) and
// returns a Store holding it. A file that cannot be read or is invalid is an
// error: a sidecar must not start on a policy it cannot apply. A file is
// invalid, too, when it names a request field that a descriptor kinds
// knows (nil: none) does not have.
func NewStore(d Defaults, path string, kinds Kinds, logger *slog.Logger, observer ReloadObserver) (*Store, error) {
	s := &Store{defaults: d, path: path, kinds: kinds, logger: logger, observer: observer}
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("policy: read policy file: %w", err)
		}
	}
	p, err := s.compile(data)
	if err != nil {
		return nil, err
	}
	s.current.Store(p)
	s.last = data
	return s, nil
}

// Policy returns the policy in force. It never blocks.
func (s *Store) Policy() *Policy {
	return s.current.Load()
}

// Run reads the file every interval (ReloadInterval when 0) and applies
// it when its content changed, until ctx ends. Without a file it returns.
func (s *Store) Run(ctx context.Context, interval time.Duration) {
	if s.path == "" {
		return
	}
	if interval <= 0 {
		interval = ReloadInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.reload()
		}
	}
}

// reload applies the file if it changed since the last read.
func (s *Store) reload() {
	data, err := os.ReadFile(s.path)
	if err == nil && bytes.Equal(data, s.last) {
		return
	}
	var p *Policy
	if err == nil {
		s.last = data
		p, err = s.compile(data)
	} else {
		err = fmt.Errorf("policy: read policy file: %w", err)
	}
	if err != nil {
		if err.Error() != s.lastErr {
			s.lastErr = err.Error()
			s.logger.Error("policy file not applied; the policy in force stays", "file", s.path, "error", err)
		}
		if s.observer != nil {
			s.observer.ObservePolicyReload(false)
		}
		return
	}
	s.lastErr = ""
	// Logged and counted before it is in force: whoever sees the new policy
	// finds its reload in the logs and the metrics too.
	s.logger.Info("policy file applied", "file", s.path, "methods", len(p.exact), "services", len(p.services))
	if s.observer != nil {
		s.observer.ObservePolicyReload(true)
	}
	s.current.Store(p)
}

// compile is New for the store's defaults and file, whose content is data,
// checked against what its kinds know now.
func (s *Store) compile(data []byte) (*Policy, error) {
	p, err := New(s.defaults, s.path, data)
	if err != nil || s.kinds == nil {
		return p, err
	}
	if err := p.CheckFields(s.kinds); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", s.path, err)
	}
	return p, nil
}
