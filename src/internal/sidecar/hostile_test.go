package sidecar

import (
	"bytes"
	"context"
	"errors"
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
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
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
	acks   chan [8]byte  // the data of the server's PING acks
	framer *http2.Framer // writes only: the reading goroutine has its own
	enc    *hpack.Encoder
	buf    bytes.Buffer
	next   uint32 // the next stream id
}

// dialRaw connects to addr, sends the HTTP/2 preface and settings, and
// reads what the server sends until the test ends, keeping only its PING
// acks.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawConn{conn: conn, closed: make(chan struct{}), acks: make(chan [8]byte, 1), framer: http2.NewFramer(conn, nil), next: 1}
	c.enc = hpack.NewEncoder(&c.buf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(c.closed)
		frames := http2.NewFramer(nil, conn)
		for {
			f, err := frames.ReadFrame()
			if err != nil {
				_, _ = io.Copy(io.Discard, conn) // a frame this client cannot parse: read on to the end
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				select {
				case c.acks <- p.Data:
				default: // nobody waits for this one
				}
			}
		}
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

// sync sends a PING and waits for its ack. The server reads a connection's
// frames in order and starts each stream's handler as it reads its headers:
// when the ack comes, every stream opened before has been taken in or refused.
func (c *rawConn) sync(t *testing.T) {
	t.Helper()
	data := [8]byte{'s', 'y', 'n', 'c'}
	if err := c.framer.WritePing(false, data); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Recv(t, "the server's PING ack", c.acks); got != data {
		t.Fatalf("PING ack %q, want %q", got, data)
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
func rssKiB(t testing.TB) int64 {
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
	const opened, chat = 30_000, "/hello.v1.Greeter/Chat"
	for _, method := range []string{sayHello, chat} { // collapsed, passed through
		t.Run(method, func(t *testing.T) {
			// The backend holds each Chat stream open until its caller leaves.
			var chats atomic.Int64 // Chat streams open at the backend
			backend := &testkit.Greeter{SayHello: greet, Chat: func(stream grpc.BidiStreamingServer[hellov1.HelloRequest, hellov1.HelloReply]) error {
				chats.Add(1)
				defer chats.Add(-1)
				<-stream.Context().Done()
				return stream.Context().Err()
			}}
			sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) { c.Policy.CollapseMethods = []string{sayHello} })
			okCall(t, sc.addr)
			goroutines, heap, rss := runtime.NumGoroutine(), testkit.LiveHeap(), rssKiB(t)
			c := dialRaw(t, sc.addr)
			for range opened {
				c.open(t, method)
			}
			held := serverlimits.DefaultMaxConcurrentStreams
			testkit.WaitFor(t, "the server to take in the streams", func() bool { return runtime.NumGoroutine()-goroutines >= held })
			if method == chat {
				testkit.WaitFor(t, "the backend to hold the streams passed through", func() bool { return chats.Load() == int64(held) })
			}
			c.sync(t) // any stream beyond the limit, were it accepted, has its handler now
			// The backend's handlers are the test's goroutines, not the sidecar's.
			grown, heapGrown := runtime.NumGoroutine()-goroutines-int(chats.Load()), testkit.LiveHeap()-heap
			bound := 3*held + 50
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
		sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), nil, logTo(slog.New(logs)))
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
		sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), nil, logTo(slog.New(logs)))
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
	// The review's callers gave up after 10 ms. Here they give up once each
	// one's call is at the backend, which never answers, or queued for one
	// of its slots, and the sidecar bounds a call by an hour: a backend call
	// ends only if the sidecar cancels it when its last caller leaves.
	callers := 2 * config.Default().Proxy.MaxBackendCalls // half of the calls queue
	// The backend never answers: it counts the calls their caller cancelled.
	var cancelled atomic.Int64
	backend := &testkit.Greeter{SayHello: func(ctx context.Context, _ *hellov1.HelloRequest) (*hellov1.HelloReply, error) {
		<-ctx.Done()
		if errors.Is(ctx.Err(), context.Canceled) {
			cancelled.Add(1)
		}
		return nil, ctx.Err()
	}}
	sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Policy.Timeout = time.Hour
		c.Policy.CollapseMethods = []string{sayHello}
	})
	clients := make([]hellov1.GreeterClient, 4)
	for i := range clients {
		conn := dial(t, sc.addr)
		waitServing(t, conn) // connected
		clients[i] = hellov1.NewGreeterClient(conn)
	}
	goroutines := runtime.NumGoroutine()

	ctx, giveUp := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, err := clients[i%len(clients)].SayHello(ctx, &hellov1.HelloRequest{Name: fmt.Sprint("distinct-", i)})
			if status.Code(err) != codes.Canceled {
				t.Errorf("caller %d: %v, want CANCELLED: it gave up", i, err)
			}
		})
	}
	testkit.WaitForCount(t, "every call at the backend or queued for a slot", callers, func() int {
		return int(backend.Calls.SayHello.Load()) + sc.proxy.Stats().Queued
	})
	giveUp()
	wg.Wait()
	testkit.WaitFor(t, "the backend calls to end", func() bool { return sc.proxy.Stats().InFlight == 0 })
	testkit.WaitFor(t, "every call at the backend cancelled", func() bool { return cancelled.Load() == backend.Calls.SayHello.Load() })
	// Nothing of the run stays behind: the calls ended, and their goroutines.
	testkit.WaitFor(t, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= goroutines+10 })
	t.Logf("%d callers gave up: %d backend calls, all cancelled", callers, backend.Calls.SayHello.Load())
}

func TestHostile_LargeKeysCountAgainstTheCacheLimit(t *testing.T) {
	const requests, payload, limit = 400, 1 << 20, 1 << 20
	sc := startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
		c.Proxy.Cache.MaxBytes = limit
		c.Policy.CacheTTL = time.Hour
	})
	client := hellov1.NewGreeterClient(dial(t, sc.addr))
	okCall(t, sc.addr)
	heap, rss := testkit.LiveHeap(), rssKiB(t)
	for _, size := range []int{payload, payload / 4} { // keys too large to keep; keys of which four fit
		for i := range requests / 2 {
			name := fmt.Sprintf("%d-%s", i, strings.Repeat("k", size))
			// Each call has its own bound: under -race one takes 0.1 s, and
			// all of them together come near one DefaultTimeout.
			if _, err := client.SayHello(testkit.Context(t), &hellov1.HelloRequest{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := sc.proxy.Stats()
	grown := testkit.LiveHeap() - heap
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
