package hello

import (
	"sync/atomic"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// greeterMethods are the counted methods, by full gRPC method name.
var greeterMethods = [...]string{
	hellov1.Greeter_SayHello_FullMethodName,
	hellov1.Greeter_StreamHellos_FullMethodName,
	hellov1.Greeter_CollectHellos_FullMethodName,
	hellov1.Greeter_Chat_FullMethodName,
	hellov1.Greeter_GetGreeting_FullMethodName,
	hellov1.Greeter_SetGreeting_FullMethodName,
}

// method indexes greeterMethods.
type method int

const (
	sayHello method = iota
	streamHellos
	collectHellos
	chat
	getGreeting
	setGreeting
)

// counts holds one request counter per Greeter method.
type counts struct {
	byMethod [len(greeterMethods)]atomic.Int64
}

// add counts one request to m and returns m's count including it.
func (c *counts) add(m method) int64 {
	return c.byMethod[m].Add(1)
}

// snapshot returns the total and the per-method counts by full method name.
// Methods are read one by one, so under load the snapshot is not atomic
// across methods; total always equals the sum of the returned map.
func (c *counts) snapshot() (int64, map[string]int64) {
	var total int64
	by := make(map[string]int64, len(greeterMethods))
	for i, name := range greeterMethods {
		n := c.byMethod[i].Load()
		by[name] = n
		total += n
	}
	return total, by
}
