package rtpstats

import (
	"math"
	"testing"
)

func TestSequenceAccounting(t *testing.T) {
	seqRange := func(from, n int) []uint16 {
		var s []uint16
		for i := 0; i < n; i++ {
			s = append(s, uint16(from+i))
		}
		return s
	}
	tests := []struct {
		name     string
		seqs     []uint16
		reset    int // index before which Reset is called (0 = never)
		expected uint64
		lost     int64
		late     uint64
		restarts uint64
	}{
		{"in order", seqRange(1, 100), 0, 100, 0, 0, 0},
		{"gap", []uint16{1, 2, 5}, 0, 5, 2, 0, 0},
		{"wrap", []uint16{65534, 65535, 0, 1}, 0, 4, 0, 0, 0},
		{"wrap with loss", []uint16{65534, 1}, 0, 4, 2, 0, 0},
		{"long run across two wraps", seqRange(60000, 140000), 0, 140000, 0, 0, 0},
		{"reordered", []uint16{1, 3, 2, 4}, 0, 4, 0, 1, 0},
		{"reordered across wrap", []uint16{65533, 65535, 0, 65534, 1}, 0, 5, 0, 1, 0},
		{"duplicate", []uint16{1, 2, 2, 3}, 0, 3, -1, 1, 0},
		{"late and lost", []uint16{10, 12, 14, 11}, 0, 5, 1, 1, 0},
		// A jump beyond MaxDropout is held back; the next packet in
		// sequence confirms the restart and starts a new run.
		{"restart confirmed", []uint16{1, 2, 3, 40000, 40001, 40002}, 0, 5, 0, 0, 1},
		{"single wild packet ignored", []uint16{1, 2, 40000, 3, 4}, 0, 4, 0, 0, 0},
		{"backward beyond misorder is a jump", []uint16{1000, 1001, 500, 1002}, 0, 3, 0, 0, 0},
		{"reset keeps history", []uint16{1, 2, 4, 9000, 9001}, 3, 6, 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Receiver
			for i, s := range tt.seqs {
				if tt.reset > 0 && i == tt.reset {
					r.Reset()
				}
				r.Update(s, uint32(s)*160, int64(i)*20e6, 172)
			}
			st := r.Stats()
			if st.Packets != uint64(len(tt.seqs)) || st.Bytes != 172*uint64(len(tt.seqs)) {
				t.Errorf("packets/bytes = %d/%d", st.Packets, st.Bytes)
			}
			if st.Expected != tt.expected || st.Lost != tt.lost || st.Late != tt.late || st.Restarts != tt.restarts {
				t.Errorf("expected/lost/late/restarts = %d/%d/%d/%d, want %d/%d/%d/%d",
					st.Expected, st.Lost, st.Late, st.Restarts, tt.expected, tt.lost, tt.late, tt.restarts)
			}
		})
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		name    string
		clock   int
		offset  func(i int) int64 // arrival deviation in ns
		wantMs  float64
		within  float64
		tsStart uint32
	}{
		{"perfect pacing", 8000, func(int) int64 { return 0 }, 0, 0.001, 0},
		// Transit alternates between 0 and 1 ms: |D| = 1 ms every packet,
		// so J converges to 1 ms.
		{"alternating 1 ms", 8000, func(i int) int64 { return int64(i%2) * 1e6 }, 1, 0.02, 0},
		{"alternating 1 ms at 48 kHz", 48000, func(i int) int64 { return int64(i%2) * 1e6 }, 1, 0.02, 0},
		{"timestamp wrap is not jitter", 8000, func(int) int64 { return 0 }, 0, 0.001, math.MaxUint32 - 800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Receiver
			r.SetClockRate(tt.clock)
			step := uint32(tt.clock / 50) // 20 ms
			for i := 0; i < 500; i++ {
				r.Update(uint16(i), tt.tsStart+uint32(i)*step, 5e9+int64(i)*20e6+tt.offset(i), 172)
			}
			if got := r.Stats().Jitter; math.Abs(got-tt.wantMs) > tt.within {
				t.Errorf("jitter = %.4f ms, want %.3f ± %.3f", got, tt.wantMs, tt.within)
			}
		})
	}
	var zero Receiver
	if s := zero.Stats(); s != (Stats{}) {
		t.Errorf("zero receiver stats = %+v", s)
	}
}

func TestUpdateDoesNotAllocate(t *testing.T) {
	var r Receiver
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		r.Update(uint16(i), uint32(i)*160, int64(i)*20e6, 172)
		i++
	}); n != 0 {
		t.Errorf("%v allocations per Update", n)
	}
}

func BenchmarkUpdate(b *testing.B) {
	var r Receiver
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		r.Update(uint16(i), uint32(i)*160, int64(i)*20e6, 172)
		i++
	}
}
