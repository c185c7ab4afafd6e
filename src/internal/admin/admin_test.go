package admin

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/secretfile"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The proxy's purges on write go through the admin service.
var _ proxy.Invalidator = (*Service)(nil)

// purges records what the Service asked of its Purger, and answers n.
type purges struct {
	calls []string
	md    metadata.MD
	n     int
}

func (p *purges) PurgeRequest(method, sub string, payload []byte, md metadata.MD, how proxy.Purge) int {
	p.calls = append(p.calls, "request "+method+" "+sub+" "+string(payload)+" "+how2s(how))
	p.md = md
	return p.n
}

func (p *purges) PurgeMethod(method string, how proxy.Purge) int {
	p.calls = append(p.calls, "method "+method+" "+how2s(how))
	return p.n
}

func (p *purges) PurgeTag(tag string, how proxy.Purge) int {
	p.calls = append(p.calls, "tag "+tag+" "+how2s(how))
	return p.n
}

func (p *purges) PurgeAll() int {
	p.calls = append(p.calls, "all")
	return p.n
}

func (p *purges) TakeBackAll() int {
	p.calls = append(p.calls, "take back all")
	return p.n
}

// how2s writes how: hard or soft, then the scope unless it is Everything,
// then the age unless it is zero.
func how2s(how proxy.Purge) string {
	s := "hard"
	if how.Soft {
		s = "soft"
	}
	switch how.Scope {
	case proxy.Owned:
		s += " owned"
	case proxy.Callers:
		s += " callers"
	}
	if how.Age != 0 {
		s += " taken " + how.Age.String() + " ago"
	}
	return s
}

// observed records what the Service told its Observer.
type observed struct{ purges []string }

func (o *observed) ObservePurge(kind, mode, result string, entries int) {
	o.purges = append(o.purges, kind+" "+mode+" "+result+" "+strconv.Itoa(entries))
}

// from returns a context whose caller connected from addr.
func from(addr string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}})
}

func TestPurge_CallsThePurgerForEachSelector(t *testing.T) {
	tests := []struct {
		req  *adminv1.PurgeRequest
		want string
	}{
		{&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: "/a.B/Get"}}, "method /a.B/Get hard"},
		{&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "user:42"}, Soft: true}, "tag user:42 soft"},
		{&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Request{Request: &adminv1.Request{
			Method: "/a.B/Get", Payload: []byte("p"), ContentSubtype: "json",
			Headers: []*adminv1.Header{{Name: ":authority", Values: []string{"svc:50052"}}, {Name: "authorization", Values: []string{"Bearer a"}}},
		}}}, "request /a.B/Get json p hard"},
	}
	for _, tt := range tests {
		p, o := &purges{n: 3}, &observed{}
		s := New(Options{Purger: p, Observer: o})
		resp, err := s.Purge(from("127.0.0.1"), tt.req)
		if err != nil || resp.GetEntries() != 3 {
			t.Errorf("Purge(%v) = %v, %v; want 3 entries", tt.req, resp, err)
		}
		if len(p.calls) != 1 || p.calls[0] != tt.want {
			t.Errorf("Purge(%v) asked %q, want %q", tt.req, p.calls, tt.want)
		}
		if len(o.purges) != 1 || !strings.HasSuffix(o.purges[0], "ok 3") {
			t.Errorf("observed %q, want one ok purge of 3", o.purges)
		}
	}
	p := &purges{}
	New(Options{Purger: p}).Purge(from("::1"), tests[2].req)
	if got := p.md; got.Get(":authority")[0] != "svc:50052" || got.Get("authorization")[0] != "Bearer a" {
		t.Errorf("request headers passed as %v", got)
	}
}

func TestPurge_BadRequestsAreRefusedAndChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		req  *adminv1.PurgeRequest
		code codes.Code
		want string
	}{
		{"no selector", from("127.0.0.1"), &adminv1.PurgeRequest{}, codes.InvalidArgument, "no selector: set one of request, method or tag"},
		{"bad method", from("127.0.0.1"), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: "Get"}}, codes.InvalidArgument, `method "Get"`},
		{"empty tag", from("127.0.0.1"), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{}}, codes.InvalidArgument, `tag "": want 1 to 128 bytes`},
		{"long tag", from("127.0.0.1"), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: strings.Repeat("t", 129)}}, codes.InvalidArgument, "want 1 to 128 bytes"},
		{"request without method", from("127.0.0.1"), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Request{Request: &adminv1.Request{}}}, codes.InvalidArgument, `request.method ""`},
		{"upper-case header", from("127.0.0.1"), &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Request{Request: &adminv1.Request{
			Method: "/a.B/C", Headers: []*adminv1.Header{{Name: "Authorization"}},
		}}}, codes.InvalidArgument, `request.headers[0].name "Authorization": want a lower-case header name or :authority`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, o := &purges{}, &observed{}
			_, err := New(Options{Purger: p, Observer: o}).Purge(tt.ctx, tt.req)
			if st := status.Convert(err); st.Code() != tt.code || !strings.Contains(st.Message(), tt.want) {
				t.Errorf("err = %v, want %v containing %q", err, tt.code, tt.want)
			}
			if len(p.calls) != 0 {
				t.Errorf("purger asked %q: a refused request changes nothing", p.calls)
			}
			if len(o.purges) != 1 || strings.HasSuffix(o.purges[0], "ok 0") {
				t.Errorf("observed %q, want one purge that is not ok", o.purges)
			}
		})
	}
}

func TestNewPeer_TakesOneScopeFromReplicasAndSkipsItsOwn(t *testing.T) {
	// Who may call it, the peer listener's server decides
	// (peers.Authenticate; the sidecar's tests try every call without the
	// token).
	tag := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "x"}}
	incoming := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(from("10.1.2.3"), metadata.Pairs(kv...))
	}
	tests := []struct {
		name     string
		ctx      context.Context
		calls    []string
		replicas int32
	}{
		{"owned scope", incoming(ScopeHeader, "owned", OriginHeader, "other"), []string{"tag x hard owned"}, 1},
		{"callers scope", incoming(ScopeHeader, "callers"), []string{"tag x hard callers"}, 1},
		{"no scope: everything", incoming(), []string{"tag x hard"}, 1},
		{"its own purge", incoming(ScopeHeader, "owned", OriginHeader, "me"), nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &purges{n: 2}
			r := testReplicas(t, p)
			ctx := tt.ctx
			if origin := metadata.ValueFromIncomingContext(ctx, OriginHeader); slices.Equal(origin, []string{"me"}) {
				md, _ := metadata.FromIncomingContext(ctx)
				md.Set(OriginHeader, r.journal.ID())
				ctx = metadata.NewIncomingContext(ctx, md)
			}
			resp, err := NewPeer(p, r).Purge(ctx, tag)
			if err != nil || !slices.Equal(p.calls, tt.calls) || resp.GetReplicas() != tt.replicas {
				t.Errorf("Purge = %v, %v, asked %q; want asked %q, %d replicas", resp, err, p.calls, tt.calls, tt.replicas)
			}
		})
	}
}

// testReplicas returns the Replicas of a sidecar alone on a fixed list.
func testReplicas(t *testing.T, p Purger) *Replicas {
	t.Helper()
	token, err := secretfile.Load(testkit.SecretFile(t, strings.Repeat("t", 32)), 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplicas(ReplicasOptions{Target: "127.0.0.1:50053", Listen: "127.0.0.1:50053", Trust: peers.Trust{Token: token}, Purger: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestNewPeer_APurgePushedTwiceIsAppliedOnce(t *testing.T) {
	p := &purges{n: 1}
	r := testReplicas(t, p)
	tag := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "x"}}
	ctx := metadata.NewIncomingContext(from("10.1.2.3"), metadata.Pairs(OriginHeader, "other", SeqHeader, "7"))
	for range 2 {
		if _, err := NewPeer(p, r).Purge(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(p.calls, []string{"tag x hard"}) {
		t.Errorf("asked %q, want the purge once", p.calls)
	}
}

// An entry fetched from another replica's journal is taken as its scope
// and its age say: the handoffs' pause after a purge counts from when the
// journal took it. One whose purge is not valid changes nothing.
func TestApplyEntry_TakesThePurgeOfItsScopeAsLongAgoAsItsAge(t *testing.T) {
	tag := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Tag{Tag: "x"}, Soft: true}
	for _, tt := range []struct {
		name  string
		entry *peerv1.Entry
		want  []string
	}{
		{"aged", &peerv1.Entry{Purge: tag, Scope: peerv1.Scope_SCOPE_OWNED, Age: durationpb.New(time.Minute)}, []string{"tag x soft owned taken 1m0s ago"}},
		{"from a replica that sends no age", &peerv1.Entry{Purge: tag}, []string{"tag x soft"}},
		{"not valid", &peerv1.Entry{Purge: &adminv1.PurgeRequest{}, Age: durationpb.New(time.Minute)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &purges{}
			applyEntry(p, tt.entry)
			if !slices.Equal(p.calls, tt.want) {
				t.Errorf("asked %q, want %q", p.calls, tt.want)
			}
		})
	}
}

func TestInvalidate_PurgesEachMethodAndTagHardAndCountsThem(t *testing.T) {
	p, o := &purges{n: 1}, &observed{}
	if err := New(Options{Purger: p, Observer: o}).Invalidate(context.Background(), []string{"/a.B/Get"}, []string{"user:1", "org:2"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"method /a.B/Get hard", "tag user:1 hard", "tag org:2 hard"}; !slices.Equal(p.calls, want) {
		t.Errorf("asked %q, want %q", p.calls, want)
	}
	if want := []string{"method hard ok 1", "tag hard ok 1", "tag hard ok 1"}; !slices.Equal(o.purges, want) {
		t.Errorf("observed %q, want %q", o.purges, want)
	}
	err := New(Options{Purger: p, Observer: o}).Invalidate(context.Background(), []string{"Get"}, nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Invalidate of a malformed method: %v, want INVALID_ARGUMENT", err)
	}
}

// unixPeer returns a context whose caller connected over a Unix socket.
func unixPeer() context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "@", Net: "unix"}})
}

func TestAdmit_ChecksEveryCallerBeforeItsCallIsRead(t *testing.T) {
	token := strings.Repeat("a", 32)
	admin, err := secretfile.Load(testkit.SecretFile(t, token), 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(v string) metadata.MD { return metadata.Pairs("authorization", v) }
	for _, tt := range []struct {
		name string
		o    Options
		ctx  context.Context
		md   metadata.MD
		code codes.Code
	}{
		{"loopback", Options{}, from("127.0.0.1"), nil, codes.OK},
		{"a Unix socket", Options{}, unixPeer(), nil, codes.OK},
		{"another address", Options{}, from("10.1.2.3"), nil, codes.PermissionDenied},
		{"mesh's inbound passthrough, without a token", Options{}, from("127.0.0.6"), nil, codes.OK},
		{"no peer at all", Options{}, context.Background(), nil, codes.PermissionDenied},
		{"another address, AllowRemote", Options{AllowRemote: true}, from("10.1.2.3"), nil, codes.OK},
		{"token: loopback without it", Options{Token: admin}, from("127.0.0.6"), nil, codes.Unauthenticated},
		{"token: a Unix socket without it", Options{Token: admin}, unixPeer(), nil, codes.Unauthenticated},
		{"token: a wrong one", Options{Token: admin}, from("127.0.0.1"), bearer("Bearer " + strings.Repeat("b", 32)), codes.Unauthenticated},
		{"token: without Bearer", Options{Token: admin}, from("127.0.0.1"), bearer(token), codes.Unauthenticated},
		{"token: twice", Options{Token: admin}, from("127.0.0.1"), metadata.Pairs("authorization", "Bearer "+token, "authorization", "Bearer "+token), codes.Unauthenticated},
		{"token: from any address", Options{Token: admin}, from("10.1.2.3"), bearer("Bearer " + token), codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, o := &purges{}, &observed{}
			tt.o.Purger, tt.o.Observer = p, o
			err := New(tt.o).admit(tt.ctx, tt.md)
			if status.Code(err) != tt.code {
				t.Errorf("admit = %v, want %v", err, tt.code)
			}
			if refused := slices.Equal(o.purges, []string{"none hard refused 0"}); refused != (tt.code != codes.OK) {
				t.Errorf("observed %q; want one refusal only when refused", o.purges)
			}
		})
	}
}
