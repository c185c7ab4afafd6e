// Package secretfile reads a secret from a file, as Kubernetes mounts a
// Secret, and reads it again when it changes: the one watcher every part
// that reads a secret file uses (the peer token, the admin token).
//
// A Secret rotates in place: the kubelet swaps the files under the mount,
// and the replicas of a workload see the new value at different moments,
// within its sync period of each other. So a Value accepts both the secret
// it reads now and the one it read before (Matches), while it presents the
// one it reads now (Current): during a rotation, a replica that still
// presents the previous secret is let in, and the rotation splits no one.
//
// Run compares the file's contents every interval rather than watch
// notifications: the kubelet replaces a symbolic link to a new directory,
// which inotify on the file would not see, and a read a few seconds apart
// costs nothing.
package secretfile

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultInterval is how often Run reads the file again.
const DefaultInterval = 10 * time.Second

// Value is a secret read from a file, with the one read before it. Create
// one with Load; it is safe for concurrent use.
type Value struct {
	path     string
	minBytes int
	logger   *slog.Logger

	mu                sync.RWMutex
	current, previous []byte
}

// Load reads the secret at path, which must hold at least minBytes bytes
// once the spaces and newlines around it are trimmed. logger (nil: none)
// is told when a new value is read, or a read fails.
func Load(path string, minBytes int, logger *slog.Logger) (*Value, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	v := &Value{path: path, minBytes: minBytes, logger: logger}
	secret, err := v.read()
	if err != nil {
		return nil, err
	}
	v.current = secret
	return v, nil
}

// read reads and checks the file.
func (v *Value) read() ([]byte, error) {
	data, err := os.ReadFile(v.path)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", v.path, err)
	}
	secret := bytes.TrimSpace(data)
	if len(secret) < v.minBytes {
		return nil, fmt.Errorf("secret %s: %d bytes, want at least %d", v.path, len(secret), v.minBytes)
	}
	return secret, nil
}

// Reload reads the file again. A new secret becomes the current one, and
// the current one the previous; a file that cannot be read, or holds too
// short a secret, changes nothing and is reported.
func (v *Value) Reload() error {
	secret, err := v.read()
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !bytes.Equal(secret, v.current) {
		v.current, v.previous = secret, v.current
		v.logger.Info("secret changed: the previous one is still accepted", "path", v.path)
	}
	return nil
}

// Run reads the file again every interval (0: DefaultInterval) until ctx
// ends; a failed read is logged, and the secret stays as it was.
func (v *Value) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := v.Reload(); err != nil {
				v.logger.Warn("secret not read again: the one read before stays", "err", err)
			}
		}
	}
}

// Current returns the secret read now.
func (v *Value) Current() string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return string(v.current)
}

// Matches reports whether got is the secret read now or the one read
// before it, in constant time: how long it takes does not tell how much of
// got was right.
func (v *Value) Matches(got string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	current := subtle.ConstantTimeCompare([]byte(got), v.current)
	previous := 0
	if v.previous != nil {
		previous = subtle.ConstantTimeCompare([]byte(got), v.previous)
	}
	return current|previous == 1
}
