package proxy

// collapsedStackPad is how far growStack reaches below its caller's frame:
// far enough that a stack of 8 KiB cannot hold it, with the frames under it
// (grpc-go's server and serve, about 2 KiB) and the runtime's guard, and
// near enough that 16 KiB can.
const collapsedStackPad = 8 << 10

// growStack grows the calling goroutine's stack to 16 KiB, if it is
// smaller, while the stack is still shallow.
//
// grpc-go runs each call on a goroutine of its own, whose stack starts
// small and is copied to one twice the size whenever the call goes deeper
// than it. A collapsed call that leads goes deep: its backend call runs
// under the proxy's and the collapse group's frames, and grpc-go's client
// needs about 4 KiB more below them, past 8 KiB in all. Without this, that
// copy came at the deepest point, a stack of 8 KiB and some 30 frames,
// about 7 us of CPU per miss (runtime.newstack under grpc-go's
// createHeaderFields in a profile), where a pass-through's call never grows
// past 8 KiB. Here the copy is of a few frames; the pad it clears is the
// memory the deep call then uses. A goroutine whose stack is 16 KiB
// already only checks its bound.
//
// CockroachDB's util/growstack does the same for its deep goroutines.
// grpc-go's own remedy, server workers that keep their grown stacks
// (grpc.NumStreamWorkers), would serve every method alike, and only while
// a worker is free.
//
//go:noinline
func growStack() {
	var pad [collapsedStackPad]byte
	reach(&pad)
}

// reach is growStack's use of its pad, which keeps the pad in growStack's
// frame; it does nothing, so the pad stays on the stack.
//
//go:noinline
func reach(*[collapsedStackPad]byte) {}
