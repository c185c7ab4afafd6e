package heapsize_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/collapser/collapser/src/internal/heapsize"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// perObject returns the live heap growth per object of making n objects
// with newObj, keeping them all.
func perObject[T any](n int, newObj func(i int) T) float64 {
	objs := make([]T, 0, n) // made before the measure: only the objects count
	before := testkit.LiveHeap()
	for i := range n {
		objs = append(objs, newObj(i))
	}
	grown := testkit.LiveHeap() - before
	runtime.KeepAlive(objs)
	return float64(grown) / float64(n)
}

// countFor returns how many objects of about size bytes make a few MiB:
// enough that the heap's own noise is lost in their sum.
func countFor(size int) int {
	return max(100, (8<<20)/max(size, 1))
}

// within fails t unless got, what a helper of heapsize counts, is within 10% of
// measured, what the heap holds.
func within(t *testing.T, what string, got int64, measured float64) {
	t.Helper()
	if ratio := float64(got) / measured; ratio < 0.9 || ratio > 1.1 {
		t.Errorf("%s: counted %d bytes, the heap holds %.0f (%.2f×)", what, got, measured, ratio)
	}
}

func TestOf_IsWhatTheAllocatorHolds(t *testing.T) {
	for _, n := range []int{16, 17, 100, 129, 1000, 1025, 8192, 9000, 32768, 40000, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			measured := perObject(countFor(n), func(int) []byte { return make([]byte, n) })
			within(t, fmt.Sprintf("Of(%d)", n), heapsize.Of(n), measured)
		})
	}
}

func TestOf_RoundsUpAndCountsNothingForNothing(t *testing.T) {
	tests := []struct {
		n    int
		want int64
	}{
		{-1, 0}, {0, 0}, {1, 8}, {8, 8}, {9, 16}, {33, 48}, {32768, 32768}, {32769, 40960},
	}
	for _, tt := range tests {
		if got := heapsize.Of(tt.n); got != tt.want {
			t.Errorf("Of(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestBytes_CountsTheCapacity(t *testing.T) {
	b := make([]byte, 10, 1000)
	if got, want := heapsize.Bytes(b), heapsize.Of(1000); got != want {
		t.Errorf("Bytes(len 10, cap 1000) = %d, want %d", got, want)
	}
}

func TestMap_IsWhatTheRuntimeHolds(t *testing.T) {
	for _, n := range []int{0, 1, 8, 9, 14, 15, 30, 100, 1000, 2000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			measured := perObject(countFor(int(heapsize.Map(n, 16))), func(int) map[int64]int64 {
				m := make(map[int64]int64, n)
				for j := range n {
					m[int64(j)] = 0
				}
				return m
			})
			within(t, fmt.Sprintf("Map(%d, 16)", n), heapsize.Map(n, 16), measured)
		})
	}
}

// copied returns a metadata map of n names with values of the given
// lengths, every string its own allocation, made as grpc-go copies
// metadata (a map with room for its entries, value slices of their length).
func copied(i, n int, lengths ...int) metadata.MD {
	md := make(metadata.MD, n)
	for k := range n {
		vs := make([]string, len(lengths))
		for j, l := range lengths {
			vs[j] = strings.Repeat("v", l-1) + string(rune('a'+i%26))
		}
		md[fmt.Sprintf("x-header-%d-%d", k, i)] = vs
	}
	return md
}

func TestMD_IsWhatTheHeapHolds(t *testing.T) {
	tests := []struct {
		name    string
		entries int
		lengths []int
	}{
		{"one short value", 1, []int{20}},
		{"two values each of three names", 3, []int{40, 100}},
		{"nine names of long values", 9, []int{300}},
		{"twenty names", 20, []int{24}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sample metadata.MD
			measured := perObject(countFor(tt.entries*100), func(i int) metadata.MD {
				md := copied(i, tt.entries, tt.lengths...)
				sample = md
				return md
			})
			within(t, "MD", heapsize.MD(sample), measured)
		})
	}
}

func TestMD_NilHoldsNothing(t *testing.T) {
	if got := heapsize.MD(nil); got != 0 {
		t.Errorf("MD(nil) = %d, want 0", got)
	}
}

func TestChan_IsWhatTheHeapHolds(t *testing.T) {
	measured := perObject(countFor(heapsize.Chan), func(int) chan struct{} { return make(chan struct{}) })
	within(t, "Chan", heapsize.Chan, measured)
}

// fromWire returns a status error as a gRPC client gets one: the status
// decoded from the encoding of s, as grpc-go decodes its
// grpc-status-details-bin trailer, then made an error of its own as the
// proxy makes it (status.Convert(err).Err()).
func fromWire(t *testing.T, s *spb.Status) func(int) error {
	wire, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return func(int) error {
		decoded := new(spb.Status)
		if err := proto.Unmarshal(wire, decoded); err != nil {
			t.Fatal(err)
		}
		return status.Convert(status.ErrorProto(decoded)).Err()
	}
}

func TestStatusErr_IsWhatTheHeapHolds(t *testing.T) {
	detail := func(n int) *anypb.Any {
		d, err := anypb.New(&errdetails.ResourceInfo{ResourceType: "greeting", ResourceName: "caller-0000001", Description: strings.Repeat(".", n)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name string
		s    *spb.Status
	}{
		{"a message alone", &spb.Status{Code: int32(codes.NotFound), Message: "no greeting for caller-0000001"}},
		{"one detail of 16 KiB", &spb.Status{Code: int32(codes.NotFound), Message: "no greeting", Details: []*anypb.Any{detail(16 << 10)}}},
		{"three details of 1 KiB", &spb.Status{Code: int32(codes.NotFound), Message: "no greeting", Details: []*anypb.Any{detail(1 << 10), detail(1 << 10), detail(1 << 10)}}},
		{"five small details", &spb.Status{Code: int32(codes.PermissionDenied), Message: "not yours", Details: []*anypb.Any{detail(10), detail(20), detail(30), detail(40), detail(50)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newErr := fromWire(t, tt.s)
			sample := newErr(0)
			measured := perObject(countFor(int(heapsize.StatusErr(sample))), newErr)
			within(t, "StatusErr", heapsize.StatusErr(sample), measured)
		})
	}
}

func TestStatusErr_NilHoldsNothing(t *testing.T) {
	if got := heapsize.StatusErr(nil); got != 0 {
		t.Errorf("StatusErr(nil) = %d, want 0", got)
	}
	if got := heapsize.Status(nil); got != 0 {
		t.Errorf("Status(nil) = %d, want 0", got)
	}
}
