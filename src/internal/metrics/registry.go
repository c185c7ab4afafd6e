package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the standard Go runtime and process
// collectors (go_*, process_*), for a binary to add its own metrics to.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves the metrics gathered from g in the Prometheus exposition
// format, or in OpenMetrics when the scraper asks for it (Prometheus does):
// only OpenMetrics carries exemplars. Gathering errors are logged with the
// default slog logger and the metrics that could be gathered are still
// served.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          errorLog{},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// errorLog adapts promhttp's error logging to the slog default logger, looked
// up when an error happens so a logger installed later is still used.
type errorLog struct{}

func (errorLog) Println(v ...any) {
	slog.Error("serve metrics", "error", fmt.Sprint(v...))
}
