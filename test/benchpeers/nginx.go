package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"text/template"
)

// nginxConf is nginx's configuration: a gRPC reverse proxy over h2c
// (grpc_pass grpc://) with everything under its own prefix directory, in
// the foreground, no access log. The limits are raised so that nginx, not
// its defaults, is measured: 128 streams per connection and 1000 requests
// per connection would cut the burst and the steady runs short.
// Upstream keepalive keeps backend connections open between calls, as a
// production grpc_pass does; nginx never multiplexes calls on one.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`# Written by benchpeers (make bench-peers).
daemon off;
master_process on;
worker_processes {{.Workers}};
worker_rlimit_nofile {{.Files}};
pid {{.Dir}}/nginx.pid;
lock_file {{.Dir}}/nginx.lock;
error_log stderr warn;

events {
    worker_connections {{.Connections}};
}

http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    fastcgi_temp_path {{.Dir}}/fastcgi;
    uwsgi_temp_path {{.Dir}}/uwsgi;
    scgi_temp_path {{.Dir}}/scgi;

    upstream backend {
        server {{.Backend}};
        keepalive {{.Keepalive}};
        keepalive_requests 1000000;
        keepalive_timeout 300s;
    }

    server {
        listen {{.Listen}} http2;
        http2_max_concurrent_streams {{.Streams}};
        keepalive_requests 1000000;
        keepalive_timeout 300s;

        location / {
            grpc_pass grpc://backend;
        }
    }
}
`))

// nginxSettings fill nginxConf.
type nginxSettings struct {
	Dir         string // prefix: pid, lock and temp files
	Listen      string
	Backend     string
	Workers     string // a number, or auto
	Files       uint64 // open files per worker
	Connections int    // per worker: callers' and upstream's together
	Streams     int    // concurrent calls per caller connection
	Keepalive   int    // idle upstream connections kept per worker
}

// nginxStreams matches collapser's default limit of calls per connection.
const nginxStreams = 1000

// writeNginxConf writes the configuration of an nginx listening on listen
// and forwarding to backend into dir, and returns its path. workers is the
// number of CPUs nginx is pinned to (0: not pinned, one per CPU).
func writeNginxConf(dir, listen, backend string, workers int, burst int) (string, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "", fmt.Errorf("nginx: open files limit: %w", err)
	}
	s := nginxSettings{
		Dir:     dir,
		Listen:  listen,
		Backend: backend,
		Workers: "auto",
		Files:   lim.Max,
		// A burst holds one upstream connection per call in flight, plus the
		// callers' connections and room to spare.
		Connections: burst + 1024,
		Streams:     nginxStreams,
		Keepalive:   128,
	}
	if workers > 0 {
		s.Workers = strconv.Itoa(workers)
	}
	if uint64(s.Connections) > lim.Max {
		return "", fmt.Errorf("nginx: a burst of %d calls needs %d open files, the limit is %d", burst, s.Connections, lim.Max)
	}
	// Workers run as nobody when nginx starts as root: let them in.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("nginx: %w", err)
	}
	path := filepath.Join(dir, "nginx.conf")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("nginx: %w", err)
	}
	if err := nginxConf.Execute(f, s); err != nil {
		f.Close()
		return "", fmt.Errorf("nginx: write %s: %w", path, err)
	}
	return path, f.Close()
}
