package main

import (
	"os"
	"strings"
	"testing"
)

func TestWriteNginxConf_ProxiesGRPCWithRaisedLimits(t *testing.T) {
	dir := t.TempDir()
	path, err := writeNginxConf(dir+"/nginx", "127.0.0.1:8443", "127.0.0.1:50051", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{
		"daemon off;", "worker_processes 1;", "pid " + dir + "/nginx/nginx.pid;",
		"listen 127.0.0.1:8443 http2;", "server 127.0.0.1:50051;", "grpc_pass grpc://backend;",
		"http2_max_concurrent_streams 1000;", "keepalive_requests 1000000;", "worker_connections 1124;",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, conf)
		}
	}
}
