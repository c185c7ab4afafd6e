package hello

import (
	"context"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// stats implements hellov1.StatsServer. Its calls are not counted.
type stats struct {
	hellov1.UnimplementedStatsServer
	s *Server
}

// GetCounts returns the Greeter request counts, every method listed.
func (st stats) GetCounts(context.Context, *hellov1.GetCountsRequest) (*hellov1.GetCountsReply, error) {
	total, byMethod := st.s.counts.snapshot()
	return &hellov1.GetCountsReply{Total: total, ByMethod: byMethod}, nil
}
