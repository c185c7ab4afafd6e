package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks returns the kernel's clock ticks per second, the unit of the
// CPU times in /proc/<pid>/stat (getconf CLK_TCK).
func clockTicks() (int, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	hz, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || hz <= 0 {
		return 0, fmt.Errorf("getconf CLK_TCK: unexpected output %q", out)
	}
	return hz, nil
}

// cpuMeter reads the CPU time processes have used from /proc.
type cpuMeter struct {
	ticksPerSecond int
}

// groupCPU returns the user+system CPU time used so far by the processes
// now in process group pgid (nginx's master and workers; a Go server's one
// process).
func (m cpuMeter) groupCPU(pgid int) (time.Duration, error) {
	stats, err := groupStats(pgid)
	if err != nil {
		return 0, err
	}
	if len(stats) == 0 {
		return 0, fmt.Errorf("no process in group %d", pgid)
	}
	var ticks uint64
	for _, st := range stats {
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * time.Second / time.Duration(m.ticksPerSecond), nil
}

// groupStats returns the parsed /proc/<pid>/stat of every process now in
// process group pgid, zombies included.
func groupStats(pgid int) ([]procStat, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var stats []procStat
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited since the glob
		}
		st, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if st.pgrp == pgid {
			stats = append(stats, st)
		}
	}
	return stats, nil
}

// procStat holds the fields of /proc/<pid>/stat the harness reads.
type procStat struct {
	state        byte // R, S, Z (zombie), …
	pgrp         int
	utime, stime uint64 // clock ticks
}

// parseStat parses the content of /proc/<pid>/stat (proc(5)). The command
// name, field 2, is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	// After the name comes field 3 (state), so field n is rest[n-3].
	rest := strings.Fields(string(b[end+1:]))
	if len(rest) < 13 {
		return procStat{}, fmt.Errorf("stat: %d fields after the name, want at least 13", len(rest))
	}
	field := func(n int) string { return rest[n-3] }
	pgrp, errP := strconv.Atoi(field(5))
	utime, errU := strconv.ParseUint(field(14), 10, 64)
	stime, errS := strconv.ParseUint(field(15), 10, 64)
	if err := errors.Join(errP, errU, errS); err != nil {
		return procStat{}, fmt.Errorf("stat: %w", err)
	}
	return procStat{state: field(3)[0], pgrp: pgrp, utime: utime, stime: stime}, nil
}
