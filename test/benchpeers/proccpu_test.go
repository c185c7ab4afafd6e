package main

import (
	"os"
	"syscall"
	"testing"
)

func TestParseStat_CountsFieldsFromTheLastParenthesis(t *testing.T) {
	line := "4242 (we(ird) na)me) S 1 4240 4240 0 -1 4194560 1234 0 0 0 731 88 0 0 20 0 9 0 100 1000 10 18446744073709551615\n"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{state: 'S', pgrp: 4240, utime: 731, stime: 88}
	if got != want {
		t.Errorf("parseStat = %+v, want %+v", got, want)
	}
}

func TestParseStat_RejectsTruncatedLines(t *testing.T) {
	for _, line := range []string{"", "1 (x) S 1 2", "1 x S 1 2 3 4 5 6 7 8 9 10 11 12 13"} {
		if _, err := parseStat([]byte(line)); err == nil {
			t.Errorf("parseStat(%q): no error", line)
		}
	}
}

func TestGroupCPU_FindsTheTestsOwnGroup(t *testing.T) {
	hz, err := clockTicks()
	if err != nil {
		t.Skip(err)
	}
	if _, err := (cpuMeter{ticksPerSecond: hz}).groupCPU(syscall.Getpgrp()); err != nil {
		t.Errorf("groupCPU of the test's own group (pid %d): %v", os.Getpid(), err)
	}
}
