package config

import (
	"errors"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load. Load must never panic; a failure
// is a non-empty Errors; a success validates, survives Marshal → Load, and
// can be cloned, redacted and sealed. Seeds live in testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Load(data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Load error is not a non-empty Errors: %T %v", err, err)
			}
			return
		}
		if errs := d.Validate(); errs != nil {
			t.Fatalf("Load succeeded but Validate = %v", errs)
		}
		roundTrip(t, d)
		r := d.Redact()
		s := r.Clone()
		if err := s.Seal(d); err != nil {
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Seal error is %T", err)
			}
		}
	})
}
