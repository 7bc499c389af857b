package store

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestServicesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/outpost.db"
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0).UTC()
	for _, v := range []ServiceSetting{
		{Extension: "1001", Feature: "dnd", Value: "on", Base: "off", Set: at},
		{Extension: "1001", Feature: "forward_busy", Value: "1002", Base: "", Set: at},
		{Extension: "1001", Feature: "dnd", Value: "off", Base: "off", Set: at.Add(time.Second)}, // replaces the first
	} {
		if err := st.SetService(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ServiceSetting{
		{Extension: "1001", Feature: "dnd", Value: "off", Base: "off", Set: at.Add(time.Second)},
		{Extension: "1001", Feature: "forward_busy", Value: "1002", Base: "", Set: at},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", got, want)
	}
}
