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

// Server serves Sync from a Journal. It checks no access itself: serve it
// only where the release's own replicas alone get in (the peer listener,
// peers.Authenticate).
type Server struct {
	peerv1.UnimplementedReplicasServer
	journal *Journal
}

// NewServer returns a Server of j.
func NewServer(j *Journal) *Server {
	return &Server{journal: j}
}

// Register registers s on srv.
func (s *Server) Register(srv grpc.ServiceRegistrar) {
	peerv1.RegisterReplicasServer(srv, s)
}

// Sync implements peerv1.ReplicasServer.
func (s *Server) Sync(_ context.Context, req *peerv1.SyncRequest) (*peerv1.SyncResponse, error) {
	if len(req.GetReplica()) > maxAddressBytes {
		return nil, status.Errorf(codes.InvalidArgument, "coherence: replica address of %d bytes: want at most %d", len(req.GetReplica()), maxAddressBytes)
	}
	return s.journal.Sync(req), nil
}
