package dialplan

import (
	"testing"

	"github.com/outpost/outpost/mode"
)

func BenchmarkOutbound(b *testing.B) {
	p := examplePlan(b)
	for _, c := range []struct {
		name, number string
		md           mode.Mode
	}{
		{"local", "1001", mode.Normal},
		{"hq", "2001", mode.Normal},
		{"survivable-alt", "2001", mode.Survivable},
		{"national", "88435550101", mode.Normal},
		{"e164-last-rule", "+74951234567", mode.Survivable},
		{"emergency", "112", mode.Standalone},
		{"no-match", "5555", mode.Normal},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = p.Outbound(c.number, c.md)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = p.Outbound("2001", mode.Survivable)
			}
		})
	})
}

func BenchmarkInboundDID(b *testing.B) {
	p := examplePlan(b)
	for _, did := range []string{"+78435550101", "+78435550100"} {
		b.Run(did, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = p.InboundDID(did)
			}
		})
	}
}
