package coherence

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
)

// maxAddressBytes bounds the address a replica gives for itself.
const maxAddressBytes = 256

// Server serves Sync from a Journal to the replicas access lets in.
type Server struct {
	peerv1.UnimplementedReplicasServer
	journal *Journal
	access  func(context.Context) error
}

// NewServer returns a Server of j that asks access of every caller.
func NewServer(j *Journal, access func(context.Context) error) *Server {
	return &Server{journal: j, access: access}
}

// Register registers s on srv.
func (s *Server) Register(srv grpc.ServiceRegistrar) {
	peerv1.RegisterReplicasServer(srv, s)
}

// Sync implements peerv1.ReplicasServer.
func (s *Server) Sync(ctx context.Context, req *peerv1.SyncRequest) (*peerv1.SyncResponse, error) {
	if err := s.access(ctx); err != nil {
		return nil, err
	}
	if len(req.GetReplica()) > maxAddressBytes {
		return nil, status.Errorf(codes.InvalidArgument, "coherence: replica address of %d bytes: want at most %d", len(req.GetReplica()), maxAddressBytes)
	}
	return s.journal.Sync(req), nil
}
