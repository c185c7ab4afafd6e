package hello

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// greetings are the greetings SetGreeting set, by name: the hello backend's
// one piece of state, so that a write and the reads it outdates can be shown.
type greetings struct {
	mu     sync.Mutex
	byName map[string]*hellov1.Greeting
}

// get returns a copy of name's greeting, or nil.
func (g *greetings) get(name string) *hellov1.Greeting {
	g.mu.Lock()
	defer g.mu.Unlock()
	if v, ok := g.byName[name]; ok {
		return &hellov1.Greeting{Name: v.Name, Text: v.Text, Version: v.Version}
	}
	return nil
}

// set sets name's greeting to text and returns it with its new version.
func (g *greetings) set(name, text string) *hellov1.Greeting {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byName == nil {
		g.byName = map[string]*hellov1.Greeting{}
	}
	v := &hellov1.Greeting{Name: name, Text: text, Version: 1}
	if old, ok := g.byName[name]; ok {
		v.Version = old.Version + 1
	}
	g.byName[name] = v
	return &hellov1.Greeting{Name: v.Name, Text: v.Text, Version: v.Version}
}

// GreetingTag is the tag of name's greeting, in HeaderTags of both
// GetGreeting's and SetGreeting's answers.
func GreetingTag(name string) string { return "greeting:" + name }

// GetGreeting answers name's greeting after the configured latency, tagged
// GreetingTag(name), or NOT_FOUND when none is set.
func (g greeter) GetGreeting(ctx context.Context, req *hellov1.GetGreetingRequest) (*hellov1.Greeting, error) {
	if err := g.s.receiveTagged(ctx, getGreeting, req.GetName()); err != nil {
		return nil, err
	}
	v := g.s.greetings.get(req.GetName())
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "hello: no greeting is set for %q", req.GetName())
	}
	return v, nil
}

// SetGreeting sets the request's greeting after the configured latency and
// answers it with its version, tagged GreetingTag(name).
func (g greeter) SetGreeting(ctx context.Context, req *hellov1.Greeting) (*hellov1.Greeting, error) {
	if err := g.s.receiveTagged(ctx, setGreeting, req.GetName()); err != nil {
		return nil, err
	}
	return g.s.greetings.set(req.GetName(), req.GetText()), nil
}

// receiveTagged counts one request of m, waits the configured latency and
// tags the answer GreetingTag(name) in HeaderTags.
func (s *Server) receiveTagged(ctx context.Context, m method, name string) error {
	if _, err := s.receive(ctx, m); err != nil {
		return err
	}
	if err := s.wait(ctx); err != nil {
		return err
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(HeaderTags, GreetingTag(name))); err != nil {
		return status.Errorf(codes.Internal, "set header: %v", err)
	}
	return nil
}
