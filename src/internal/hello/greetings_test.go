package hello

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestGreetings_AWriteIsReadBackVersionedAndTagged(t *testing.T) {
	c := startServer(t, Options{})
	ctx := testkit.Context(t)
	get := func(name string) (*hellov1.Greeting, metadata.MD, error) {
		var header metadata.MD
		g, err := c.greeter.GetGreeting(ctx, &hellov1.GetGreetingRequest{Name: name}, grpc.Header(&header))
		return g, header, err
	}
	if _, _, err := get("alice"); status.Code(err) != codes.NotFound {
		t.Fatalf("GetGreeting before any write: %v, want NOT_FOUND", err)
	}
	for version, text := range []string{"hi", "hello"} {
		var header metadata.MD
		set, err := c.greeter.SetGreeting(ctx, &hellov1.Greeting{Name: "alice", Text: text, Version: 99}, grpc.Header(&header))
		if err != nil {
			t.Fatalf("SetGreeting(%s): %v", text, err)
		}
		want := int64(version + 1)
		if set.GetText() != text || set.GetVersion() != want {
			t.Errorf("SetGreeting(%s) = %v, want version %d (the request's version is ignored)", text, set, want)
		}
		got, getHeader, err := get("alice")
		if err != nil || got.GetText() != text || got.GetVersion() != want {
			t.Errorf("GetGreeting after SetGreeting(%s) = %v, %v; want version %d", text, got, err, want)
		}
		for _, h := range []metadata.MD{header, getHeader} {
			if tags := h.Get(HeaderTags); len(tags) != 1 || tags[0] != GreetingTag("alice") {
				t.Errorf("answer tags %q, want [%s]", tags, GreetingTag("alice"))
			}
		}
	}
	if _, _, err := get("bob"); status.Code(err) != codes.NotFound {
		t.Errorf("GetGreeting(bob): %v, want NOT_FOUND: alice's writes are hers", err)
	}
	counts, err := c.stats.GetCounts(ctx, &hellov1.GetCountsRequest{})
	by := counts.GetByMethod()
	if err != nil || by[hellov1.Greeter_GetGreeting_FullMethodName] != 4 || by[hellov1.Greeter_SetGreeting_FullMethodName] != 2 || counts.GetTotal() != 6 {
		t.Errorf("GetCounts = %v, %v; want 4 GetGreeting and 2 SetGreeting", counts, err)
	}
}
