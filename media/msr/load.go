package msr

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LoadFunc returns the box's load in percent (0–100), announced in every
// REGISTER as {prefix}Load for media resource selection.
type LoadFunc func() int

// DefaultCapacityPPS is the relay packet rate taken as 100 % load when
// the appliance does not name one (msr.capacity_pps): media/relay kept
// 50 000 RTP packets/s without loss on half a core of the benchmark box
// (bench/RESULTS.md, "Media relay"), and it sends one packet per packet
// received, so past that rate the box is full whatever the CPU says.
const DefaultCapacityPPS = 50000

// NewLoad returns the LoadFunc the appliance gives WithLoad: the larger of
// the CPU load (/proc/stat deltas, as without WithLoad) and the relay's
// packet rate against capacityPPS (read at each call, so a new
// configuration applies at the next REGISTER; nil or ≤ 0 =
// DefaultCapacityPPS), both over the interval since the previous call —
// one REGISTER pass. packets is a monotonic count of the RTP packets the
// relay accepted (relay.Stats's TotalPackets); nil means CPU only. Safe
// for concurrent use.
func NewLoad(packets func() uint64, capacityPPS func() int) LoadFunc {
	return newBoxLoad(newCPULoad(nil).Load, packets, capacityPPS, time.Now).Load
}

// boxLoad is NewLoad's state: the packet count and time of the previous
// call.
type boxLoad struct {
	cpu      LoadFunc
	packets  func() uint64
	capacity func() int
	now      func() time.Time

	mu    sync.Mutex
	lastN uint64
	lastT time.Time
}

func newBoxLoad(cpu LoadFunc, packets func() uint64, capacityPPS func() int, now func() time.Time) *boxLoad {
	b := &boxLoad{cpu: cpu, packets: packets, capacity: capacityPPS, now: now}
	if packets != nil {
		b.lastN, b.lastT = packets(), now()
	}
	return b
}

// Load returns max(CPU %, packets/s ÷ capacity × 100), clamped to 0–100.
func (b *boxLoad) Load() int {
	load := b.cpu()
	if b.packets != nil {
		load = max(load, b.relayLoad())
	}
	return min(max(load, 0), 100)
}

// relayLoad is the relay's packet rate since the previous call, in percent
// of the capacity (rounded up: any traffic shows).
func (b *boxLoad) relayLoad() int {
	n, t := b.packets(), b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	dn, dt := n-b.lastN, t.Sub(b.lastT).Seconds()
	if n < b.lastN {
		dn = 0 // counter reset (a new relay): no rate this time
	}
	b.lastN, b.lastT = n, t
	if dt <= 0 {
		return 0
	}
	pct := float64(dn) / dt / float64(b.capacityPPS()) * 100
	return int(min(math.Ceil(pct), 100))
}

// capacityPPS is the capacity in force.
func (b *boxLoad) capacityPPS() int {
	if b.capacity != nil {
		if c := b.capacity(); c > 0 {
			return c
		}
	}
	return DefaultCapacityPPS
}

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
