package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestSipgoLogBounded(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newSipgoLogHandler(slog.NewTextHandler(&buf, nil))).With("part", "sipgo")
	for range 1000 {
		log.Error("failed to parse", "data", strings.Repeat("X", 65000))
	}
	lines := strings.Count(buf.String(), "\n")
	if lines > 2*sipgoLogBurst { // the test may straddle a second boundary
		t.Fatalf("%d lines logged for 1000 records in about a second", lines)
	}
	if buf.Len() > lines*(sipgoLogAttrMax+200) {
		t.Fatalf("%d bytes for %d lines: data not cut", buf.Len(), lines)
	}
}
