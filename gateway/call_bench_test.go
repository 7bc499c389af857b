package gateway

import (
	"math"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"testing"
)

// BenchmarkCall is one whole call through the B2BUA over loopback UDP, as
// the call-rate benchmark's SIPp makes it (bench/call_bench.sh): a trusted
// PSTN gateway's INVITE to a DID that reaches a registered phone; 180
// and 200 back (the phone rings at once, so the box sends no 100 Trying);
// ACK; BYE and its 200. Calls run one after another, so
// ns/op is a call's latency through the box, not its cost; cpu-µs/op is
// the process's CPU time (user + system, getrusage) per call, and with
// B/op and allocs/op includes the test's two peers, which build their
// messages with fmt and strings (the same work in every build, so the
// difference between two builds is the box's); goroutines/op is the
// goroutines started per call (the peers read and write on the
// benchmark's own goroutine, so these are the box's). live-B/call is what
// a finished call leaves on the heap while its transactions are retained;
// the overload gate's memory criterion is off, so that the benchmark's
// rate (a call every half millisecond) does not shed its own calls.
func BenchmarkCall(b *testing.B) {
	_, gw, callee := pstnCall(b, func(s *Server) { s.overload.SetHeapLimit(math.MaxUint64) })
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	g0 := created[0].Value.Uint64()
	n := 0
	for b.Loop() {
		n++
		id := "bench-" + strconv.Itoa(n)
		gw.send(gw.newInvite(id, "z9hG4bK-"+id, "+15551001"))
		inv := callee.readRequest("INVITE")
		callee.send(reply(inv, "180 Ringing", "cl"+id))
		callee.send(reply(inv, "200 OK", "cl"+id))
		ok := gw.readStatus("200")
		gw.send(inDialog("ACK", ok, gw, 1))
		callee.readRequest("ACK")
		gw.send(inDialog("BYE", ok, gw, 2))
		bye := callee.readRequest("BYE")
		callee.send(reply(bye, "200 OK", "cl"+id))
		gw.readStatus("200")
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	cpu := syscall.TimevalToNsec(after.Utime) - syscall.TimevalToNsec(before.Utime) +
		syscall.TimevalToNsec(after.Stime) - syscall.TimevalToNsec(before.Stime)
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu-µs/op")
	metrics.Read(created)
	b.ReportMetric(float64(created[0].Value.Uint64()-g0)/float64(n), "goroutines/op")

	// What a finished call leaves behind: the live heap after a collection,
	// over the calls that ended within retainFinished (the transactions'
	// retention) before it.
	elapsed := b.Elapsed()
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	recent := float64(n)
	if elapsed > retainFinished {
		recent *= float64(retainFinished) / float64(elapsed)
	}
	b.ReportMetric(float64(live[0].Value.Uint64())/recent, "live-B/call")
}
