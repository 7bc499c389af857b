package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
)

func TestRetryable(t *testing.T) {
	wrappedTimeout := fmt.Errorf("gateway/b2bua: INVITE udp:198.18.1.10:5060: %w", context.DeadlineExceeded)
	wrappedNoResp := fmt.Errorf("transaction: %w", ErrNoResponse)
	opErr := &net.OpError{Op: "write", Net: "udp", Err: errors.New("network is unreachable")}
	for _, tc := range []struct {
		name   string
		status int
		err    error
		want   bool
	}{
		{"408 request timeout", 408, nil, true},
		{"503 service unavailable", 503, nil, true},
		{"504 server time-out", 504, nil, true},
		{"deadline exceeded", 0, context.DeadlineExceeded, true},
		{"wrapped deadline", 0, wrappedTimeout, true},
		{"no response sentinel", 0, ErrNoResponse, true},
		{"wrapped no response", 0, wrappedNoResp, true},
		{"transport error", 0, opErr, true},
		{"any error, status 0", 0, io.EOF, true},
		{"status 0, no error", 0, nil, true},
		{"provisional then timeout", 180, context.DeadlineExceeded, true},
		{"our caller cancelled", 0, context.Canceled, false},
		{"wrapped cancel", 0, fmt.Errorf("x: %w", context.Canceled), false},
		{"200 ok", 200, nil, false},
		{"302 moved", 302, nil, false},
		{"404 not found", 404, nil, false},
		{"480 temporarily unavailable", 480, nil, false},
		{"486 busy here", 486, nil, false},
		{"487 terminated", 487, nil, false},
		{"500 server error", 500, nil, false},
		{"502 bad gateway", 502, nil, false},
		{"513 message too large", 513, nil, false},
		{"600 busy everywhere", 600, nil, false},
		{"603 decline", 603, nil, false},
		{"final status decides despite err", 486, context.DeadlineExceeded, false},
		{"503 with err", 503, io.EOF, true},
	} {
		if got := Retryable(tc.status, tc.err); got != tc.want {
			t.Errorf("%s: Retryable(%d, %v) = %v, want %v", tc.name, tc.status, tc.err, got, tc.want)
		}
	}
}

func TestClassifyForHealth(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{0, context.DeadlineExceeded, Failure},
		{0, ErrNoResponse, Failure},
		{0, fmt.Errorf("w: %w", ErrNoResponse), Failure},
		{0, io.EOF, Failure},
		{0, nil, Failure},
		{0, context.Canceled, Unknown},
		{100, nil, Success},
		{180, context.Canceled, Success},
		{200, nil, Success},
		{404, nil, Success},
		{408, nil, Success}, // the target answered; Retryable still says retry
		{486, nil, Success},
		{500, nil, Failure},
		{503, nil, Failure},
		{504, nil, Failure},
		{599, nil, Failure},
		{603, nil, Success},
	} {
		if got := ClassifyForHealth(tc.status, tc.err); got != tc.want {
			t.Errorf("ClassifyForHealth(%d, %v) = %v, want %v", tc.status, tc.err, got, tc.want)
		}
	}
}

func TestClassifyAttempt(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{0, context.DeadlineExceeded, Failure},
		{0, fmt.Errorf("w: %w", ErrNoResponse), Failure},
		{0, io.EOF, Failure},
		{0, context.Canceled, Unknown},
		{180, context.Canceled, Unknown},
		{180, io.EOF, Failure},
		{200, nil, Success},
		{404, nil, Success},
		{408, nil, Failure}, // the retry rule moves on: so does the block
		{486, nil, Success},
		{487, nil, Success},
		{500, nil, Success}, // an answer about this call, not the gateway
		{502, nil, Success},
		{503, nil, Failure},
		{504, nil, Failure},
		{603, nil, Success},
	} {
		if got := ClassifyAttempt(tc.status, tc.err); got != tc.want {
			t.Errorf("ClassifyAttempt(%d, %v) = %v, want %v", tc.status, tc.err, got, tc.want)
		}
	}
}
