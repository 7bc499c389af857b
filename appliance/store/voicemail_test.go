package store

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestVoicemailIndexSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/outpost.db"
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0).UTC()
	a := VoicemailMessage{ID: "a", Mailbox: "1001", Caller: "+15550100", CallerName: "Bob", Received: at, State: "recording"}
	b := VoicemailMessage{ID: "b", Mailbox: "1002", Received: at.Add(-time.Minute), Duration: 2500 * time.Millisecond, Bytes: 40000, State: "new"}
	c := VoicemailMessage{ID: "c", Mailbox: "1001", Received: at.Add(time.Minute), State: "new"}
	for _, m := range []VoicemailMessage{a, b, c} {
		if err := st.PutVoicemail(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	a.State, a.Duration, a.Bytes, a.Delivered = "saved", 3*time.Second, 48000, at.Add(time.Hour)
	if err := st.PutVoicemail(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteVoicemail(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.Voicemail(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []VoicemailMessage{b, a}; !reflect.DeepEqual(all, want) {
		t.Fatalf("all:\n got %+v\nwant %+v", all, want)
	}
	one, _ := st.Voicemail(ctx, "1001")
	if len(one) != 1 || one[0].ID != "a" {
		t.Fatalf("1001: %+v", one)
	}
	if err := st.PutVoicemail(ctx, VoicemailMessage{ID: "x", Mailbox: "1001", State: "bogus"}); err == nil {
		t.Fatal("a row in an unknown state was stored")
	}
}

func TestVoicemailPINs(t *testing.T) {
	ctx := context.Background()
	st := openTest(t)
	if h, err := st.VoicemailPIN(ctx, "1001"); err != nil || h != "" {
		t.Fatalf("unset PIN: %q %v", h, err)
	}
	for _, h := range []string{"first", "second"} {
		if err := st.SetVoicemailPIN(ctx, "1001", h); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := st.VoicemailPIN(ctx, "1001"); err != nil || h != "second" {
		t.Fatalf("PIN: %q %v", h, err)
	}
}
