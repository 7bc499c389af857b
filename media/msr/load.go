package msr

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// LoadFunc returns the box's load in percent (0–100), announced in every
// REGISTER as {prefix}Load for media resource selection.
type LoadFunc func() int

// cpuLoad computes the CPU load of the box from the deltas of the first
// line of /proc/stat between two calls: busy = total − idle − iowait. The
// first call measures since boot. Safe for concurrent use.
type cpuLoad struct {
	read func() ([]byte, error)

	mu               sync.Mutex
	lastTotal, lastI uint64
}

func newCPULoad(read func() ([]byte, error)) *cpuLoad {
	if read == nil {
		read = func() ([]byte, error) { return os.ReadFile("/proc/stat") }
	}
	return &cpuLoad{read: read}
}

// Load returns the busy share since the previous call, in percent; 0 if
// /proc/stat cannot be read (a box that cannot say is not penalised).
func (c *cpuLoad) Load() int {
	b, err := c.read()
	if err != nil {
		return 0
	}
	total, idle, err := parseProcStat(b)
	if err != nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dt, di := total-c.lastTotal, idle-c.lastI
	if total < c.lastTotal || idle < c.lastI {
		dt, di = total, idle // counters reset
	}
	c.lastTotal, c.lastI = total, idle
	if dt == 0 {
		return 0
	}
	return int((dt - min(di, dt)) * 100 / dt)
}

// parseProcStat reads the aggregate "cpu" line: user nice system idle
// iowait irq softirq steal (guest time is already counted in user).
func parseProcStat(b []byte) (total, idle uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var v [8]uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			if v[i-1], err = strconv.ParseUint(f[i], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("media/msr: /proc/stat: %w", err)
			}
		}
		for _, x := range v {
			total += x
		}
		return total, v[3] + v[4], nil
	}
	return 0, 0, fmt.Errorf("media/msr: /proc/stat: no cpu line")
}
