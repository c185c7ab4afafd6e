package proxy

import (
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collapser/collapser/src/internal/heapsize"
)

func TestResponseSize_CountsAKeptErrorsStatusAndItsDetails(t *testing.T) {
	const detailBytes = 16 << 10
	st, err := status.New(codes.NotFound, "no greeting").WithDetails(&errdetails.ResourceInfo{Description: strings.Repeat(".", detailBytes)})
	if err != nil {
		t.Fatal(err)
	}
	r := &Response{Trailer: metadata.Pairs("x-served-by", "a"), Err: st.Err()}
	want := heapsize.Of(int(unsafe.Sizeof(*r))) + heapsize.MD(r.Trailer) + heapsize.StatusErr(r.Err)
	if got := responseSize(r); got != want {
		t.Errorf("responseSize = %d, want %d", got, want)
	}
	bare := &Response{Trailer: r.Trailer, Err: status.Error(codes.NotFound, "no greeting")}
	if got, less := responseSize(r)-responseSize(bare), int64(detailBytes); got < less {
		t.Errorf("an error answer with %d bytes of details counts %d more than one without, want at least %d", detailBytes, got, less)
	}
}
