package main

import (
	"os"
	"path"
	"strconv"
	"strings"
)

// cgroupCPULimit returns the CPU bandwidth limit of this process's cgroup
// and its ancestors (cgroup v2 cpu.max or v1 cfs quota), in CPUs, or 0
// when there is none or it cannot be read.
func cgroupCPULimit() float64 {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	limit := 0.0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var roots []string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			roots = []string{"/sys/fs/cgroup"}
		case hasController(parts[1], "cpu"): // v1
			roots = []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"}
		default:
			continue
		}
		for _, root := range roots {
			for dir := parts[2]; ; dir = path.Dir(dir) {
				if l := readLimit(path.Join(root, dir)); l > 0 && (limit == 0 || l < limit) {
					limit = l
				}
				if dir == "/" || dir == "." {
					break
				}
			}
		}
	}
	return limit
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads one cgroup directory's limit: "QUOTA PERIOD" in cpu.max
// (v2) or cpu.cfs_quota_us / cpu.cfs_period_us (v1); "max" or -1 = none.
func readLimit(dir string) float64 {
	var quota, period string
	if b, err := os.ReadFile(dir + "/cpu.max"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			quota, period = f[0], f[1]
		}
	} else if b, err := os.ReadFile(dir + "/cpu.cfs_quota_us"); err == nil {
		quota = strings.TrimSpace(string(b))
		if p, err := os.ReadFile(dir + "/cpu.cfs_period_us"); err == nil {
			period = strings.TrimSpace(string(p))
		}
	}
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}
