package collapse_test

import (
	"context"
	"fmt"
	"time"

	"github.com/collapser/collapser/src/internal/collapse"
)

func Example() {
	g := collapse.New(collapse.Options[string]{})

	opts := &collapse.CallOptions{TTL: 100 * time.Millisecond}
	load := func(*collapse.Call) (string, error) { return "answer", nil }
	v, outcome, err := g.Do(context.Background(), "/hello.v1.Greeter/SayHello", opts, load)
	fmt.Println(v, outcome, err)
	v, outcome, err = g.Do(context.Background(), "/hello.v1.Greeter/SayHello", opts, load)
	fmt.Println(v, outcome, err)
	// Output:
	// answer leader <nil>
	// answer cache_hit <nil>
}
