package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/media/voicemail"
)

// VoicemailDir is where the messages are, under the data directory.
const VoicemailDir = "voicemail"

// newVoicemail opens the box's voicemail over the data directory and the
// store; changed is told of each mailbox whose messages changed.
func newVoicemail(dataDir string, st *store.Store, changed func(mailbox string), log *slog.Logger) (*voicemail.Service, error) {
	svc, err := voicemail.New(voicemail.Config{Dir: filepath.Join(dataDir, VoicemailDir), Index: storeIndex{st}, PINs: storeIndex{st}, OnChange: changed, Log: log}, voicemail.Limits{})
	if err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	return svc, nil
}

// voicemailLimits are the document's voicemail limits.
func voicemailLimits(v config.Voicemail) voicemail.Limits {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	return voicemail.Limits{MaxMessage: sec(v.EffectiveMaxMessageS()), Silence: sec(v.EffectiveSilenceS()), NoMedia: sec(v.EffectiveNoMediaS()),
		MailboxMessages: v.EffectiveMailboxMessages(), TotalBytes: int64(v.EffectiveTotalMB()) << 20}
}

// voicemailPart applies a push's limits to the voicemail (recordings in
// progress keep theirs).
type voicemailPart struct{ svc *voicemail.Service }

func (voicemailPart) name() string { return "voicemail" }

func (p voicemailPart) prepare(_ context.Context, next *partConfigs) (change, error) {
	lim := next.Voicemail
	return funcs{commit: func() { p.svc.SetLimits(lim) }}, nil
}

// Voicemail lists the messages and counters (api.VoicemailLister).
func (a *App) Voicemail(context.Context) (api.Voicemail, error) {
	ms, err := a.vm.Messages("")
	if err != nil {
		return api.Voicemail{}, fmt.Errorf("appliance: voicemail: %w", err)
	}
	out := api.Voicemail{Messages: make([]api.VoicemailMessage, 0, len(ms))}
	for _, m := range ms {
		out.Messages = append(out.Messages, api.VoicemailMessage{ID: m.ID, Mailbox: m.Mailbox, Caller: m.Caller, CallerName: m.CallerName,
			Received: m.Received, DurationMS: m.Duration.Milliseconds(), State: string(m.State), Delivered: m.Delivered})
	}
	st := a.vm.Stats()
	out.Stats = api.VoicemailStats{Recorded: st.Recorded, Empty: st.Empty, Full: st.Full, DiskFull: st.DiskFull, Failed: st.Failed,
		NoMedia: st.NoMedia, TooLong: st.TooLong, GarbageDTMF: st.GarbageDTMF, BadPackets: st.BadPackets, Recovered: st.Recovered,
		WrongPIN: st.WrongPIN, PINLocked: st.PINLocked}
	return out, nil
}

var _ api.VoicemailLister = (*App)(nil)

// mailboxes is the voicemail as the B2BUA sees it (b2bua.Mailboxes).
type mailboxes struct{ svc *voicemail.Service }

func (m mailboxes) Open(local netip.Addr, offer []byte) (b2bua.VoicemailLine, []byte, error) {
	l, answer, err := m.svc.Open(local, offer)
	if err != nil {
		return nil, nil, err
	}
	return vmLine{svc: m.svc, Line: l}, answer, nil
}

func (m mailboxes) Waiting(mailbox string) (int, int) { return m.svc.Waiting(mailbox) }

type vmLine struct {
	svc *voicemail.Service
	*voicemail.Line
}

func (l vmLine) Deposit(ctx context.Context, mailbox, caller, name string) {
	l.svc.Deposit(ctx, l.Line, mailbox, voicemail.Caller{Number: caller, Name: name})
}

func (l vmLine) Retrieve(ctx context.Context, mailbox string) { l.svc.Retrieve(ctx, l.Line, mailbox) }
func (l vmLine) RetrieveAny(ctx context.Context)              { l.svc.RetrieveAny(ctx, l.Line) }

// storeIndex is the voicemail's index in the store.
type storeIndex struct{ st *store.Store }

// indexTimeout bounds one index write: the store's writes are queued
// behind others (CDRs, bindings).
const indexTimeout = 10 * time.Second

func (x storeIndex) Put(m voicemail.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	defer cancel()
	return x.st.PutVoicemail(ctx, store.VoicemailMessage{ID: m.ID, Mailbox: m.Mailbox, Caller: m.Caller, CallerName: m.CallerName,
		Received: m.Received, Duration: m.Duration, Bytes: m.Bytes, State: string(m.State), Delivered: m.Delivered})
}

func (x storeIndex) Delete(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	defer cancel()
	return x.st.DeleteVoicemail(ctx, id)
}

func (x storeIndex) PIN(mailbox string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	defer cancel()
	return x.st.VoicemailPIN(ctx, mailbox)
}

func (x storeIndex) SetPIN(mailbox, hash string) error {
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	defer cancel()
	return x.st.SetVoicemailPIN(ctx, mailbox, hash)
}

func (x storeIndex) List(mailbox string) ([]voicemail.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), indexTimeout)
	defer cancel()
	rows, err := x.st.Voicemail(ctx, mailbox)
	out := make([]voicemail.Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, voicemail.Message{ID: r.ID, Mailbox: r.Mailbox, Caller: r.Caller, CallerName: r.CallerName,
			Received: r.Received, Duration: r.Duration, Bytes: r.Bytes, State: voicemail.State(r.State), Delivered: r.Delivered})
	}
	return out, err
}

// voicemailMetrics are the voicemail's messages by state and its events.
type voicemailMetrics struct{ a *App }

var (
	vmMessagesDesc = prometheus.NewDesc("outpost_voicemail_messages", "Messages the box keeps, by state (new, saved) and delivery to HQ (delivered: yes, no).",
		[]string{"state", "delivered"}, nil)
	vmEventsDesc = prometheus.NewDesc("outpost_voicemail_events_total", "Voicemail events since start: recorded, empty, full (caller told the mailbox is full), "+
		"disk_full, failed, no_media, too_long, garbage_dtmf, bad_packets, recovered, wrong_pin, pin_locked.", []string{"event"}, nil)
)

func (m voicemailMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- vmMessagesDesc
	ch <- vmEventsDesc
}

func (m voicemailMetrics) Collect(ch chan<- prometheus.Metric) {
	ms, _ := m.a.vm.Messages("")
	counts := map[[2]string]int{{"new", "no"}: 0, {"saved", "no"}: 0}
	for _, x := range ms {
		d := "no"
		if !x.Delivered.IsZero() {
			d = "yes"
		}
		counts[[2]string{string(x.State), d}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(vmMessagesDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	st := m.a.vm.Stats()
	for ev, n := range map[string]uint64{"recorded": st.Recorded, "empty": st.Empty, "full": st.Full, "disk_full": st.DiskFull, "failed": st.Failed,
		"no_media": st.NoMedia, "too_long": st.TooLong, "garbage_dtmf": st.GarbageDTMF, "bad_packets": st.BadPackets, "recovered": st.Recovered,
		"wrong_pin": st.WrongPIN, "pin_locked": st.PINLocked} {
		ch <- prometheus.MustNewConstMetric(vmEventsDesc, prometheus.CounterValue, float64(n), ev)
	}
}
