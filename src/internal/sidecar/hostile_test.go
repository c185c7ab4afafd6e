package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/serverlimits"
	"github.com/collapser/collapser/src/internal/testkit"
)

// The hostile tests reproduce the attacks of the hardening review against a
// whole sidecar over loopback, with the default limits, and check that what
// the attacker can make the sidecar hold stays within its documented bound
// while normal calls keep working.

// rawConn is an HTTP/2 client that speaks only frames: it can do what a
// well-behaved gRPC client never does.
type rawConn struct {
	conn   net.Conn
	closed chan struct{} // closed when the server has closed the connection
	framer *http2.Framer
	enc    *hpack.Encoder
	buf    bytes.Buffer
	next   uint32 // the next stream id
}

// dialRaw connects to addr, sends the HTTP/2 preface and settings, and
// discards whatever the server sends until the test ends.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawConn{conn: conn, closed: make(chan struct{}), framer: http2.NewFramer(conn, conn), next: 1}
	c.enc = hpack.NewEncoder(&c.buf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(io.Discard, conn)
		close(c.closed)
	})
	t.Cleanup(func() { conn.Close(); wg.Wait() })
	return c
}

// open starts a stream calling method with its headers only: no message,
// no end of stream. extra headers are added as they are.
func (c *rawConn) open(t *testing.T, method string, extra ...hpack.HeaderField) {
	t.Helper()
	if err := c.tryOpen(t, method, extra...); err != nil {
		t.Fatal(err)
	}
}

// tryOpen is open returning the error of writing to the connection.
func (c *rawConn) tryOpen(t *testing.T, method string, extra ...hpack.HeaderField) error {
	t.Helper()
	c.buf.Reset()
	fields := append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "sidecar"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...)
	for _, f := range fields {
		if err := c.enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	// Headers past a frame's size go on in CONTINUATION frames.
	block := c.buf.Bytes()
	first := block[:min(len(block), maxFrame)]
	block = block[len(first):]
	id := c.next
	c.next += 2
	if err := c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(block) == 0}); err != nil {
		return fmt.Errorf("write headers of stream %d: %w", id, err)
	}
	for len(block) > 0 {
		part := block[:min(len(block), maxFrame)]
		block = block[len(part):]
		if err := c.framer.WriteContinuation(id, len(block) == 0, part); err != nil {
			return fmt.Errorf("write headers of stream %d: %w", id, err)
		}
	}
	return nil
}

// rssKiB returns the process's resident memory (VmRSS) in KiB: the
// sidecar's, the backend's and the test clients' together, an upper bound
// of the sidecar's own.
func rssKiB(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// maxFrame is HTTP/2's default (and smallest) maximum frame size.
const maxFrame = 16 << 10

// heapInUse returns the live heap after a collection, signed: the heap can
// shrink between two readings, and their difference must not wrap around.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// okCall checks that a normal call through addr still works.
func okCall(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := hellov1.NewGreeterClient(dial(t, addr)).SayHello(ctx, &hellov1.HelloRequest{Name: "normal"}); err != nil {
		t.Errorf("normal call during the attack: %v", err)
	}
}

func TestHostile_StreamsOpenedOnOneConnectionAreBounded(t *testing.T) {
	const opened = 30_000
	for _, method := range []string{sayHello, "/hello.v1.Greeter/Chat"} { // collapsed, passed through
		t.Run(method, func(t *testing.T) {
			sc := startSidecar(t, startBackend(t, &countingBackend{}), func(c *config.Sidecar) { c.UnaryMethods = []string{sayHello} })
			okCall(t, sc.addr)
			goroutines, heap, rss := runtime.NumGoroutine(), heapInUse(), rssKiB(t)
			c := dialRaw(t, sc.addr)
			for range opened {
				c.open(t, method)
			}
			held := uint64(serverlimits.DefaultMaxConcurrentStreams)
			testkit.WaitFor(t, "the server to take in the streams", func() bool { return runtime.NumGoroutine()-goroutines >= int(held) })
			time.Sleep(100 * time.Millisecond) // let any stream beyond the limit show up, were it accepted
			grown, heapGrown := runtime.NumGoroutine()-goroutines, heapInUse()-heap
			bound := int(3*held) + 50
			t.Logf("%d streams opened: %d goroutines more (bound %d), heap +%d KiB, process RSS +%d KiB", opened, grown, bound, heapGrown>>10, rssKiB(t)-rss)
			// A held stream costs its handler's goroutine and one more: the
			// wait for its request, or, passed through, the caller→backend
			// copy and grpc-go's watcher of the backend stream.
			if grown > bound {
				t.Errorf("goroutines grew by %d, want at most %d", grown, bound)
			}
			if heapGrown > 64<<20 {
				t.Errorf("heap grew by %d MiB, want at most 64", heapGrown>>20)
			}
			okCall(t, sc.addr)
		})
	}
}

func TestHostile_InventedMethodNamesLeaveMetricsAndLogsSmall(t *testing.T) {
	long := func(i, bytes int) string { return fmt.Sprintf("/%s.S/M%d", strings.Repeat("x", bytes), i) }
	check := func(t *testing.T, sc *runningSidecar, logs *logrecorder.Recorder, calls, nameBytes int) {
		t.Helper()
		size := len(sc.scrape(t))
		t.Logf("%d calls with %d KiB method names: /metrics %d KiB, log %d bytes", calls, nameBytes>>10, size>>10, logs.Bytes())
		if size > 1<<20 {
			t.Errorf("/metrics is %d KiB, want under 1 MiB", size>>10)
		}
		if logs.Bytes() > 64<<10 {
			t.Errorf("the log grew by %d KiB, want under 64 KiB", logs.Bytes()>>10)
		}
		okCall(t, sc.addr)
	}

	t.Run("the default header bound refuses them", func(t *testing.T) {
		const calls, nameBytes = 300, 256 << 10
		logs := &logrecorder.Recorder{}
		sc := startSidecarLogging(t, startBackend(t, &countingBackend{}), slog.New(logs), nil)
		for i := range calls {
			// A grpc-go client would not even send them; the server closes
			// the connection of a client that does.
			c := dialRaw(t, sc.addr)
			_ = c.tryOpen(t, long(i, nameBytes)) // the write fails once the server has closed
			testkit.Recv(t, fmt.Sprintf("the server to close the connection of call %d, whose headers exceed its bound", i), c.closed)
		}
		check(t, sc, logs, calls, nameBytes)
	})
	t.Run("names let through reach bounded labels and logs", func(t *testing.T) {
		// More than the unknown methods' label allowance, longer than a label.
		const calls, nameBytes = 150, 16 << 10
		logs := &logrecorder.Recorder{}
		sc := startSidecarLogging(t, startBackend(t, &countingBackend{}), slog.New(logs), nil)
		conn := dial(t, sc.addr)
		for i := range calls {
			err := conn.Invoke(testkit.Context(t), long(i, nameBytes), &hellov1.HelloRequest{}, &hellov1.HelloReply{})
			if status.Code(err) != codes.Unimplemented {
				t.Fatalf("call %d to an invented method: %v, want the backend's UNIMPLEMENTED", i, err)
			}
		}
		check(t, sc, logs, calls, nameBytes)
	})
}

func TestHostile_AbandonedCallsDoNotKeepTheBackendBusy(t *testing.T) {
	// A backend call that runs to its end takes a second: only a call whose
	// cancellation never came completes.
	// The callers give up after 10 ms in the review; a loaded test machine
	// needs longer for a call to reach the backend at all.
	const callers, giveUp = 5_000, 30 * time.Millisecond
	backend := &countingBackend{latency: time.Second}
	sc := startSidecar(t, startBackend(t, backend), nil)
	clients := make([]hellov1.GreeterClient, 4)
	for i := range clients {
		clients[i] = hellov1.NewGreeterClient(dial(t, sc.addr))
		// Connected, and reflection has answered: SayHello is collapsed.
		if _, err := clients[i].SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: "warm-up"}); err != nil {
			t.Fatal(err)
		}
	}
	goroutines, callsBefore, completedBefore := runtime.NumGoroutine(), backend.calls.Load(), backend.completed.Load()

	var wg sync.WaitGroup
	sem := make(chan struct{}, 2000) // callers at once, as from many clients
	for i := range callers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), giveUp)
			defer cancel()
			_, err := clients[i%len(clients)].SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("distinct-", i)})
			if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.OK {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	testkit.WaitFor(t, "the backend calls to end", func() bool { return sc.proxy.Stats().InFlight == 0 })
	// Nothing of the run stays behind: the calls ended, and their goroutines.
	testkit.WaitFor(t, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= goroutines+10 })
	full := backend.completed.Load() - completedBefore
	t.Logf("%d callers gave up after %v: %d backend calls started, %d ran to the end; goroutines %d before and after",
		callers, giveUp, backend.calls.Load()-callsBefore, full, goroutines)
	if n := backend.calls.Load() - callsBefore; n < callers/100 {
		t.Errorf("only %d calls reached the backend: the test does not load it", n)
	}
	if full > callers/100 {
		t.Errorf("%d backend calls ran to the end for callers who had left, want almost none", full)
	}
}

func TestHostile_LargeKeysCountAgainstTheCacheLimit(t *testing.T) {
	const requests, payload, limit = 400, 1 << 20, 1 << 20
	sc := startSidecar(t, startBackend(t, &countingBackend{}), func(c *config.Sidecar) {
		c.CacheMaxBytes = limit
		c.CacheTTL = time.Hour
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	ctx := testkit.Context(t)
	okCall(t, sc.addr)
	heap, rss := heapInUse(), rssKiB(t)
	for _, size := range []int{payload, payload / 4} { // keys too large to keep; keys of which four fit
		for i := range requests / 2 {
			name := fmt.Sprintf("%d-%s", i, strings.Repeat("k", size))
			if _, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := sc.proxy.Stats()
	grown := heapInUse() - heap
	debug.FreeOSMemory() // what the heap no longer uses goes back, as the runtime's scavenger does in time
	t.Logf("%d distinct requests of up to 1 MiB, cache limit 1 MiB: cache counts %d KiB in %d entries; heap +%d KiB, process RSS +%d KiB",
		requests, st.Bytes>>10, st.Entries, grown>>10, rssKiB(t)-rss)
	if st.Bytes > limit || st.Entries == 0 {
		t.Errorf("cache holds %d bytes in %d entries, want some, within %d", st.Bytes, st.Entries, limit)
	}
	if grown > 3*limit {
		t.Errorf("heap grew by %d KiB, want within the limit and the cost of a few buffers", grown>>10)
	}
}
