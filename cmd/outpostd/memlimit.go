package main

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// memLimitShare is the part of the machine's memory the Go runtime aims to
// stay under (a soft limit: GOMEMLIMIT semantics). A branch box has a few
// hundred MB; under a call or registration flood the SIP transactions kept
// for retransmissions grow the heap quickly, and without a limit the
// collector (GOGC=200) would let it reach several times the live heap.
const memLimitShare = 0.5

// memTotal reads MemTotal from /proc/meminfo-formatted r, in bytes; 0 when
// absent.
func memTotal(r io.Reader) int64 {
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// defaultMemLimit is memLimitShare of the machine's memory, or 0 when it
// cannot be read (no limit).
func defaultMemLimit() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return int64(float64(memTotal(f)) * memLimitShare)
}
