package serverlimits_test

import (
	"io"
	"net"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/collapser/collapser/src/internal/serverlimits"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves an empty grpc.Server with l's options on l's listener on a
// loopback port until the test ends, and returns its address.
func serve(t *testing.T, l serverlimits.Limits) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(l.ServerOptions()...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l.Listener(lis))
	}()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}

// serverSettings connects to addr as an HTTP/2 client and returns the
// settings the server announces first.
func serverSettings(t *testing.T, addr string) map[http2.SettingID]uint32 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read the server's settings: %v", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		got := map[http2.SettingID]uint32{}
		_ = sf.ForeachSetting(func(s http2.Setting) error {
			got[s.ID] = s.Val
			return nil
		})
		return got
	}
}

func TestServerOptions_AnnounceTheStreamAndHeaderBounds(t *testing.T) {
	tests := []struct {
		name        string
		limits      serverlimits.Limits
		streams     uint32
		headerBytes uint32
	}{
		{"defaults", serverlimits.Limits{}, serverlimits.DefaultMaxConcurrentStreams, serverlimits.DefaultMaxHeaderBytes},
		{"set", serverlimits.Limits{MaxConcurrentStreams: 7, MaxHeaderBytes: 4096}, 7, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := serverSettings(t, serve(t, tt.limits))
			if got[http2.SettingMaxConcurrentStreams] != tt.streams || got[http2.SettingMaxHeaderListSize] != tt.headerBytes {
				t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d, SETTINGS_MAX_HEADER_LIST_SIZE %d; want %d and %d",
					got[http2.SettingMaxConcurrentStreams], got[http2.SettingMaxHeaderListSize], tt.streams, tt.headerBytes)
			}
		})
	}
}

func TestListener_AcceptsOneMoreOnlyWhenOneCloses(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limited := serverlimits.Limits{MaxConnections: 2}.Listener(lis)
	defer limited.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := limited.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first := testkit.Recv(t, "the first connection", accepted)
	second := testkit.Recv(t, "the second connection", accepted)
	defer second.Close()
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a third connection was accepted while two were open")
	default:
	}
	first.Close() // frees a slot: the third is accepted
	third := testkit.Recv(t, "the third connection, after the first closed", accepted)
	third.Close()
}
