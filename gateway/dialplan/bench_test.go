package dialplan

import "testing"

func BenchmarkOutbound(b *testing.B) {
	p := examplePlan(b)
	for _, c := range []struct {
		name, number string
		mode         Mode
	}{
		{"local", "1001", ModeNormal},
		{"hq", "2001", ModeNormal},
		{"survivable-alt", "2001", ModeSurvivable},
		{"national", "88435550101", ModeNormal},
		{"e164-last-rule", "+74951234567", ModeSurvivable},
		{"emergency", "112", ModeStandalone},
		{"no-match", "5555", ModeNormal},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = p.Outbound(c.number, c.mode)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = p.Outbound("2001", ModeSurvivable)
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
