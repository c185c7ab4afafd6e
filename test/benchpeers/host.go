package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// hostInfo says what the numbers were measured on and with.
type hostInfo struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	Kernel     string `json:"kernel"`
	ClockTicks int    `json:"clock_ticks_per_second"`
	ClientCPUs string `json:"client_cpus"` // "" = not pinned
	ServerCPUs string `json:"server_cpus"` // "" = not pinned
	Ghz        string `json:"ghz"`
	Nginx      string `json:"nginx"`
	// Collapser names the collapser build measured (--revision).
	Collapser string `json:"collapser"`
	Go        string `json:"go"`
	// GOGC is the harness's own GOGC, which every Go process of the run
	// inherits (ghz, the backend, collapser, the plain proxy); "" = Go's
	// default.
	GOGC string `json:"gogc"`
}

// describeHost collects hostInfo; what cannot be read stays "".
func describeHost(cfg config, clockTicks int) hostInfo {
	h := hostInfo{
		CPUs:       runtime.NumCPU(),
		CPUModel:   cpuModel(),
		Kernel:     strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		ClockTicks: clockTicks,
		ClientCPUs: cfg.clientCPUs,
		ServerCPUs: cfg.serverCPUs,
		Collapser:  cfg.revision,
		Go:         runtime.Version(),
		GOGC:       os.Getenv("GOGC"),
	}
	if bi, err := buildinfo.ReadFile(cfg.ghz); err == nil {
		h.Ghz = bi.Main.Version
	}
	// nginx -v prints "nginx version: nginx/1.22.1" to stderr.
	if out, err := exec.Command(cfg.nginx, "-v").CombinedOutput(); err == nil {
		h.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	return h
}

// loadAverage returns the 1, 5 and 15 minute load averages ("0.52 0.61
// 0.70"), "" if unreadable.
func loadAverage() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	sc := bufio.NewScanner(bytes.NewReader([]byte(readFile("/proc/cpuinfo"))))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// readFile returns the file's content, "" if it cannot be read.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}
