package store

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestTmpCPU(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	ups := make([]Binding, 1000)
	for i := range ups {
		ups[i] = testBinding(fmt.Sprintf("sip:%d@pbx", i), fmt.Sprintf("sip:%d@10.0.%d.%d:5060", i, i/250, i%250), exp)
	}
	s.SaveBindings(ctx, ups, nil)
	c0 := cpuNow()
	w0 := time.Now()
	const N = 500
	for i := range N {
		for j := range ups {
			ups[j].CSeq = uint32(i)
		}
		if err := s.SaveBindings(ctx, ups, nil); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("batch=%d cpu/op=%v wall/op=%v\n", batchSizes, (cpuNow()-c0)/N, time.Since(w0)/N)
}
