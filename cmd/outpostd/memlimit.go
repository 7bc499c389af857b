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
// collector (GOGC up to 800 while busy, gcpace.go) would let it reach
// several times the live heap.
const memLimitShare = 0.5

// memLimitCap caps that limit whatever the machine has: the box's heap is
// bounded by admission (gateway/overload.go refuses new calls while the
// live heap is over half of this limit: 75 MiB), and the limit keeps
// the resident size under 200 MB through a flood instead of the several
// times the live heap GOGC would allow (issue 16: RSS ≤ 200 MB through
// a 10 s flood of 10,000 INVITEs/s). A soft limit: the collector works
// harder near it, nothing fails, and under a flood the resident size
// overshoots it by 20-30 MiB (the collector is held to half the CPU): 160
// MiB peaked at 190 MiB (199 MB; one run in three 206 MB), 150 MiB at 167
// MiB (bench/RESULTS.md, issue 16 item 3).
const memLimitCap = 150 << 20

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

// defaultMemLimit is memLimitShare of the machine's memory, at most
// memLimitCap; memLimitCap when the memory cannot be read.
func defaultMemLimit() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return memLimitCap
	}
	defer f.Close()
	return memLimit(memTotal(f))
}

// memLimit is the limit for a machine with total bytes of memory (0 =
// unknown).
func memLimit(total int64) int64 {
	if l := int64(float64(total) * memLimitShare); l > 0 && l < memLimitCap {
		return l
	}
	return memLimitCap
}
