//go:build ignore

// gen writes default.ulaw: a soft arpeggio (C, E, G, C', G, E), each note
// 0.6 s with a smooth envelope, at about -20 dBFS, looped twice; quiet
// enough not to annoy, varied enough that a held caller knows the call
// is alive.
package main

import (
	"log"
	"math"
	"os"

	"github.com/outpost/outpost/media/g711"
)

func main() {
	const rate = 8000
	notes := []float64{261.63, 329.63, 392.00, 523.25, 392.00, 329.63}
	var out []byte
	for range 2 {
		for _, f := range notes {
			n := int(0.6 * rate)
			for i := range n {
				t := float64(i) / rate
				env := math.Sin(math.Pi * float64(i) / float64(n)) // 0 → 1 → 0: no clicks
				v := 0.1 * env * (math.Sin(2*math.Pi*f*t) + 0.3*math.Sin(4*math.Pi*f*t))
				out = append(out, g711.LinearToUlaw(int16(v*32767)))
			}
		}
	}
	if err := os.WriteFile("default.ulaw", out, 0o644); err != nil {
		log.Fatal(err)
	}
}
