// Command sipfuzz attacks a running SIP server with mutated real messages
// over UDP and TCP (bench/sipfuzz/fuzz) while registering a real user every
// second, and reports messages sent, rate, registrar availability, and,
// given the server's pid, whether it survived and its RSS before, right
// after and some time after the run. bench/fuzz_bench.sh runs it against
// outpostd in a network namespace of its own.
//
//	sipfuzz -target 127.0.0.1:5060 -n 1000000 -duration 10m -rate 0 \
//	        -user 1001 -password demo1001 -domain outpost.local -pid PID
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outpost/outpost/bench/sipfuzz/fuzz"
)

func main() {
	var (
		target   = flag.String("target", "127.0.0.1:5060", "server host:port (UDP and TCP)")
		n        = flag.Int("n", 1_000_000, "messages to send")
		duration = flag.Duration("duration", 10*time.Minute, "stop sending after this long")
		rate     = flag.Int("rate", 0, "messages per second (0 = as fast as possible)")
		seeds    = flag.String("seeds", "bench/sipfuzz/seeds", "directory of seed messages (*.sip)")
		tcpEvery = flag.Int("tcp-every", 10, "every Nth message goes over TCP")
		seed     = flag.Uint64("seed", 1, "random seed")
		local    = flag.String("local", "127.0.0.1:0", "local address of the fuzz sockets")
		user     = flag.String("user", "", "monitor: user to register every second (empty = no monitor)")
		password = flag.String("password", "", "monitor: password")
		domain   = flag.String("domain", "", "monitor: SIP domain (default: the target)")
		monLocal = flag.String("monitor-local", "127.0.0.2:0", "monitor: local address")
		pid      = flag.Int("pid", 0, "server pid: check it survives and read its RSS")
		settle   = flag.Duration("settle", 30*time.Second, "with -pid: wait this long after the run, then read RSS again")
		jsonOut  = flag.Bool("json", false, "print the report as JSON")
	)
	flag.Parse()
	s, err := fuzz.LoadSeeds(*seeds)
	if err != nil || len(s) == 0 {
		fmt.Fprintf(os.Stderr, "sipfuzz: seeds in %s: %v (%d found)\n", *seeds, err, len(s))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := report{Target: *target, Seeds: len(s)}
	if *pid > 0 {
		rep.RSSBeforeKiB = rssKiB(*pid)
	}
	res, err := fuzz.Run(ctx, fuzz.Config{
		Target: *target, N: *n, Duration: *duration, Rate: *rate, TCPEvery: *tcpEvery,
		Seeds: s, Seed: *seed, Local: *local,
		Monitor: fuzz.Monitor{User: *user, Password: *password, Domain: *domain, Local: *monLocal},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sipfuzz:", err)
		os.Exit(1)
	}
	rep.Result = res
	rep.Rate = res.Rate()
	rep.Ops = map[string]uint64{}
	for i, c := range res.ByOp {
		rep.Ops[fuzz.Ops[i]] = c
	}
	if *pid > 0 {
		rep.RSSAfterKiB = rssKiB(*pid)
		select {
		case <-time.After(*settle):
		case <-ctx.Done():
		}
		rep.RSSSettledKiB = rssKiB(*pid)
		rep.Alive = rep.RSSSettledKiB > 0
	}
	if *jsonOut {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
	} else {
		rep.print(*pid > 0, *settle)
	}
	if *pid > 0 && !rep.Alive {
		os.Exit(3)
	}
}

type report struct {
	Target string
	Seeds  int
	fuzz.Result
	Rate                                     float64
	Ops                                      map[string]uint64
	RSSBeforeKiB, RSSAfterKiB, RSSSettledKiB int
	Alive                                    bool
}

func (r report) print(withPid bool, settle time.Duration) {
	fmt.Printf("messages=%d udp=%d tcp=%d unsent=%d tcp_conns=%d answers=%d\n", r.Sent, r.SentUDP, r.SentTCP, r.Unsent, r.TCPConns, r.Answers)
	fmt.Printf("elapsed_s=%.1f rate=%.0f\n", r.Elapsed.Seconds(), r.Rate)
	var ops []string
	for _, name := range fuzz.Ops {
		ops = append(ops, fmt.Sprintf("%s:%d", name, r.Ops[name]))
	}
	fmt.Printf("ops=%s\n", strings.Join(ops, ","))
	m := r.Registers
	fmt.Printf("register_ok=%d register_attempts=%d register_max_gap_s=%.1f\n", m.OK, m.Attempts, m.MaxGap.Seconds())
	for _, f := range m.Failures {
		fmt.Printf("register_failure=%q\n", f)
	}
	if withPid {
		fmt.Printf("rss_before_kib=%d rss_after_kib=%d rss_after_%s_kib=%d alive=%v\n", r.RSSBeforeKiB, r.RSSAfterKiB, settle, r.RSSSettledKiB, r.Alive)
	}
}

// rssKiB is VmRSS of pid from /proc, 0 when the process is gone.
func rssKiB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kib
		}
	}
	return 0
}
