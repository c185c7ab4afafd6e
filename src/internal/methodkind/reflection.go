package methodkind

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// errNoReflection means the backend answers but serves no reflection service.
var errNoReflection = errors.New("backend serves neither grpc.reflection.v1 nor v1alpha")

// reflectionService is one version of the reflection service.
type reflectionService struct {
	version string
	method  string
	desc    *grpc.StreamDesc
}

// reflectionServices are tried in order; the next one only when the backend
// answers Unimplemented. v1alpha's messages are wire-identical to v1's (same
// fields, same numbers), so both are spoken with the v1 message types.
var reflectionServices = []reflectionService{
	{"v1", reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName, &reflectionv1.ServerReflection_ServiceDesc.Streams[0]},
	{"v1alpha", reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName, &reflectionv1alpha.ServerReflection_ServiceDesc.Streams[0]},
}

// fetchKinds asks the backend's server reflection what it declares of all
// methods of all services it lists. It returns the reflection version that
// answered.
func fetchKinds(ctx context.Context, cc grpc.ClientConnInterface) (map[string]Method, string, error) {
	for _, svc := range reflectionServices {
		kinds, err := fetchKindsWith(ctx, cc, svc)
		if status.Code(err) == codes.Unimplemented {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("reflection %s: %w", svc.version, err)
		}
		return kinds, svc.version, nil
	}
	return nil, "", errNoReflection
}

func fetchKindsWith(ctx context.Context, cc grpc.ClientConnInterface, svc reflectionService) (map[string]Method, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on every return
	cs, err := cc.NewStream(ctx, svc.desc, svc.method)
	if err != nil {
		return nil, err
	}
	stream := &grpc.GenericClientStream[reflectionv1.ServerReflectionRequest, reflectionv1.ServerReflectionResponse]{ClientStream: cs}
	ask := func(req *reflectionv1.ServerReflectionRequest) (*reflectionv1.ServerReflectionResponse, error) {
		if err := stream.Send(req); err != nil {
			// The real error (e.g. Unimplemented) is delivered by Recv.
			_, err = stream.Recv()
			return nil, err
		}
		return stream.Recv()
	}

	list, err := ask(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{ListServices: "*"},
	})
	if err != nil {
		return nil, err
	}
	if e := list.GetErrorResponse(); e != nil {
		return nil, fmt.Errorf("list services: %s", status.New(codes.Code(e.GetErrorCode()), e.GetErrorMessage()).Err())
	}
	// grpc-go's server sends a file on a stream once, however many services
	// import it: the files of one answer may need another's, so all build
	// together once every service is described.
	var files []*descriptorpb.FileDescriptorProto
	received := map[string]bool{} // file names
	described := map[string]bool{}
	for _, s := range list.GetListServicesResponse().GetService() {
		name := s.GetName()
		if described[name] {
			continue
		}
		resp, err := ask(&reflectionv1.ServerReflectionRequest{
			MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name},
		})
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", name, err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			// The service is served but its descriptor is not: its methods
			// stay unknown, the others are still learned.
			continue
		}
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			f := new(descriptorpb.FileDescriptorProto)
			if err := proto.Unmarshal(b, f); err != nil {
				return nil, fmt.Errorf("describe %s: bad file descriptor: %w", name, err)
			}
			if received[f.GetName()] {
				continue // sent before on this stream; a server may send it again
			}
			received[f.GetName()] = true
			files = append(files, f)
			for _, d := range f.GetService() {
				described[serviceName(f, d)] = true
			}
		}
	}
	return methodsOf(files), stream.CloseSend()
}
