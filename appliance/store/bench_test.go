package store

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSaveBindings measures one SaveBindings call (one transaction,
// one WAL fsync) that upserts 1000 existing bindings, the steady state of a
// registrar flushing refreshed registrations. ns/op is per call; rows/s is
// reported as well.
func BenchmarkSaveBindings(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("upserts=%d", n), func(b *testing.B) {
			s := openTest(b)
			ctx := context.Background()
			exp := time.Now().Add(time.Hour)
			ups := make([]Binding, n)
			for i := range ups {
				ups[i] = testBinding(fmt.Sprintf("sip:%d@pbx", i), fmt.Sprintf("sip:%d@10.0.%d.%d:5060", i, i/250, i%250), exp)
			}
			if err := s.SaveBindings(ctx, ups, nil); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for j := range ups {
					ups[j].CSeq = uint32(i)
				}
				if err := s.SaveBindings(ctx, ups, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkApplyConfig measures ApplyConfig (one transaction, one WAL fsync)
// for a typical and a large document.
func BenchmarkApplyConfig(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("doc=%dKiB", size>>10), func(b *testing.B) {
			s := openTest(b)
			ctx := context.Background()
			doc := make([]byte, size)
			crand.Read(doc)
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				doc[0] = byte(i)
				if _, err := s.ApplyConfig(ctx, doc, "api"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkActiveConfig measures reading the active document back.
func BenchmarkActiveConfig(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	doc := make([]byte, 64<<10)
	crand.Read(doc)
	if _, err := s.ApplyConfig(ctx, doc, "api"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := s.ActiveConfig(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddCDRs measures one AddCDRs call of a full writer batch (512
// records, one transaction, one WAL fsync) with a cancellable context, as
// the CDR writer passes it. ns/op is per batch; rows/s is reported as well.
func BenchmarkAddCDRs(b *testing.B) {
	s := openTest(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	recs := make([]CDR, 512)
	for i := range recs {
		recs[i] = CDR{CallID: fmt.Sprintf("%d-bench@10.0.0.1", i), Started: t0, Answered: t0.Add(time.Second),
			Ended: t0.Add(time.Minute), Caller: "2001", Dialled: "2002", Routed: "2002", Route: "local",
			Target: "sip:2002@10.0.0.2:5060", Mode: "normal", Code: 200, Disposition: "answered", Hangup: "caller"}
	}
	for b.Loop() {
		if err := s.AddCDRs(ctx, recs, 200_000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
