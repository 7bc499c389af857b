package msr

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Media terminates the MSR's media connections. The appliance passes one
// built on media/relay (relay.Endpoint) with WithMedia; without it every
// INVITE is answered 488 and every CONTROL join 411.
type Media interface {
	// Open binds RTP/RTCP ports on local and answers offer. An error
	// with SIPStatus() 488 (relay.ErrNotAcceptable) is answered 488, any
	// other 500.
	Open(id string, local netip.Addr, offer []byte, onInactive func(reason string)) (answer []byte, c MediaConn, err error)
}

// MediaConn is one connection's media.
type MediaConn interface {
	// Update answers a new offer (re-INVITE).
	Update(offer []byte) (answer []byte, err error)
	// ForwardTo sends the media the connection receives to to's remote
	// side, or nowhere when to is nil. to is a MediaConn of the same Media.
	ForwardTo(to MediaConn)
	// Counts returns the RTP packets received from the remote side and,
	// of those, forwarded.
	Counts() (received, forwarded uint64)
	// Close frees the ports.
	Close()
}

// WithMedia lets the agent answer INVITEs to its UAs with media from m
// and serve the msc-mixer control package.
func WithMedia(m Media) Option { return func(o *options) { o.media = m } }

// Direction of a join, as RFC 6505 writes it: seen from id1.
type Direction string

// The join directions of RFC 6505 §4.2.2.
const (
	SendRecv Direction = "sendrecv" // both ways
	SendOnly Direction = "sendonly" // id1 → id2 only
	RecvOnly Direction = "recvonly" // id2 → id1 only
	Inactive Direction = "inactive" // neither
)

// connection is one media connection: an INVITE dialog to an MSR UA.
type connection struct {
	id        string // local-tag:remote-tag (RFC 6230 §... connection-id, the MS's view)
	iface     string
	callID    string
	localTag  string
	remoteTag string
	mc        MediaConn

	// For a BYE of our own (inactivity).
	tr       *transport
	source   string  // where the INVITE came from
	target   sip.Uri // the peer's Contact
	from, to sip.Uri // our URI (the request URI), the peer's From URI

	peer *connection // joined to (guarded by mediaServer.mu)
	dir  Direction   // of the join, from this connection's side
}

// mediaServer is the agent's media side: connections by id, the
// interfaces' media addresses as the loop last announced them.
type mediaServer struct {
	media Media
	log   interface {
		Info(string, ...any)
		Warn(string, ...any)
	}

	mu     sync.Mutex
	ifaces map[string]netip.Addr // announced interface → media address
	cid    string                // the contact id
	conns  map[string]*connection
	byDlg  map[dlgKey]*connection
	// Control-channel dialogs (RFC 6230 §5), by cfw-id and by dialog.
	ctlDlgs  map[string]*ctlDialog
	ctlByDlg map[dlgKey]*ctlDialog
	// ctl is the control listener in force (nil: none); the loop sets it.
	ctl *controlServer
}

// ctlDialog is an INVITE dialog that set up a control channel: an offer
// with an m=application … TCP cfw line. Its cfw-id is the Dialog-ID the
// channel's SYNC names; BYE ends it and closes the channels bound to it.
type ctlDialog struct {
	id     string // cfw-id
	key    dlgKey
	answer []byte
}

type dlgKey struct{ callID, localTag, remoteTag string }

func newMediaServer(m Media, log interface {
	Info(string, ...any)
	Warn(string, ...any)
}) *mediaServer {
	return &mediaServer{media: m, log: log, ifaces: map[string]netip.Addr{}, conns: map[string]*connection{}, byDlg: map[dlgKey]*connection{},
		ctlDlgs: map[string]*ctlDialog{}, ctlByDlg: map[dlgKey]*ctlDialog{}}
}

// setControl publishes the control listener in force (nil when none): its
// address goes into the answers of control-channel offers, and it is told
// when a control dialog ends.
func (ms *mediaServer) setControl(s *controlServer) {
	ms.mu.Lock()
	ms.ctl = s
	ms.mu.Unlock()
}

// controlDialog says whether id is the cfw-id of a live control dialog.
func (ms *mediaServer) controlDialog(id string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.ctlDlgs[id] != nil
}

// controlInvite answers an initial INVITE whose offer sets up a control
// channel (RFC 6230 §5): 200 with the control listener's address and the
// offer's cfw-id, 488 when the offer cannot be served.
func (ms *mediaServer) controlInvite(t *transport, req *sip.Request, tx sip.ServerTransaction, o cfwOffer, err error, callID, remoteTag string) {
	ms.mu.Lock()
	ctl := ms.ctl
	dup := ms.ctlDlgs[o.id] != nil
	full := len(ms.ctlDlgs) >= maxChannels
	ms.mu.Unlock()
	// The channel is the softswitch's alone (controlServer): a control
	// dialog is accepted from the sources its listener accepts.
	src, _ := netip.ParseAddrPort(req.Source())
	switch {
	case ctl != nil && !ctl.allow.Load().allows(src.Addr()):
		respond(tx, req, sip.StatusForbidden, "Forbidden (not a server's address)")
		return
	case full:
		respond(tx, req, sip.StatusBusyHere, "Busy Here (too many control dialogs)")
		return
	}
	switch {
	case err != nil:
	case ctl == nil:
		err = errors.New("no control listener")
	case dup:
		err = errors.New("cfw-id in use by another dialog")
	}
	if err != nil {
		// Not logged: the reason phrase says why, and anyone may send it.
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here ("+err.Error()+")")
		return
	}
	localTag := randHex(8)
	d := &ctlDialog{id: o.id, key: dlgKey{callID, localTag, remoteTag}, answer: cfwAnswer(ctl.addr, o.id, strconv.FormatInt(time.Now().Unix(), 10))}
	ms.mu.Lock()
	if ms.ctlDlgs[o.id] != nil { // lost a race with the same cfw-id
		ms.mu.Unlock()
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here (cfw-id in use by another dialog)")
		return
	}
	ms.ctlDlgs[o.id], ms.ctlByDlg[d.key] = d, d
	ms.mu.Unlock()
	if err := ms.accept(t, tx, req, d.answer, localTag); err != nil {
		ms.endControl(d)
		return
	}
	ms.log.Info("media/msr: control-channel dialog", "cfw_id", o.id, "call_id", callID)
}

// endControl forgets a control dialog and closes the channels bound to
// it. Idempotent.
func (ms *mediaServer) endControl(d *ctlDialog) {
	ms.mu.Lock()
	if ms.ctlDlgs[d.id] != d {
		ms.mu.Unlock()
		return
	}
	delete(ms.ctlDlgs, d.id)
	delete(ms.ctlByDlg, d.key)
	ctl := ms.ctl
	ms.mu.Unlock()
	if ctl != nil {
		ctl.dropDialog(d.id)
	}
}

// setIfaces publishes the announced interfaces (the loop, each reconcile).
func (ms *mediaServer) setIfaces(ifs []iface, contactID string) {
	m := make(map[string]netip.Addr, len(ifs))
	for _, f := range ifs {
		m[f.Name] = f.Addr
	}
	ms.mu.Lock()
	ms.ifaces, ms.cid = m, contactID
	ms.mu.Unlock()
}

// install serves INVITE, ACK and BYE on t's socket.
func (ms *mediaServer) install(t *transport) {
	t.srv.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) { ms.invite(t, req, tx) })
	t.srv.OnAck(func(*sip.Request, sip.ServerTransaction) {})
	t.srv.OnBye(func(req *sip.Request, tx sip.ServerTransaction) { ms.bye(req, tx) })
	t.srv.OnCancel(func(req *sip.Request, tx sip.ServerTransaction) {
		// INVITEs are answered at once: nothing is pending to cancel.
		_ = tx.Respond(sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
	})
}

func respond(tx sip.ServerTransaction, req *sip.Request, code int, reason string) {
	_ = tx.Respond(sip.NewResponseFromRequest(req, code, reason, nil))
}

func (ms *mediaServer) invite(t *transport, req *sip.Request, tx sip.ServerTransaction) {
	from, to, callID := req.From(), req.To(), req.CallID()
	if from == nil || to == nil || callID == nil {
		respond(tx, req, sip.StatusBadRequest, "Bad Request")
		return
	}
	remoteTag, _ := from.Params.Get("tag")
	if localTag, ok := to.Params.Get("tag"); ok && localTag != "" {
		ms.reinvite(t, req, tx, dlgKey{callID.Value(), localTag, remoteTag})
		return
	}
	if remoteTag == "" {
		respond(tx, req, sip.StatusBadRequest, "Missing From tag")
		return
	}
	// The Request-URI is the Contact registered: sip:{iface};{id}@host.
	name, cid, _ := strings.Cut(req.Recipient.User, ";")
	ms.mu.Lock()
	addr, known := ms.ifaces[name]
	known = known && cid == ms.cid
	ms.mu.Unlock()
	if !known {
		respond(tx, req, sip.StatusNotFound, "Not Found")
		return
	}
	if len(req.Body()) == 0 {
		// A late offer would need an offer of our own in the 200.
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here (offer required)")
		return
	}
	if o, ok, err := parseCFWOffer(req.Body()); ok {
		ms.controlInvite(t, req, tx, o, err, callID.Value(), remoteTag)
		return
	}
	localTag := randHex(8)
	c := &connection{id: localTag + ":" + remoteTag, iface: name, callID: callID.Value(), localTag: localTag, remoteTag: remoteTag,
		tr: t, source: req.Source(), from: req.Recipient, to: from.Address}
	if ct := req.Contact(); ct != nil {
		c.target = ct.Address
	} else {
		c.target = from.Address
	}
	if ms.media == nil {
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here (no media)")
		return
	}
	answer, mc, err := ms.media.Open(c.id, addr, req.Body(), func(reason string) { ms.inactive(c, reason) })
	if err != nil {
		ms.log.Info("media/msr: INVITE refused", "iface", name, "call_id", c.callID, "err", err)
		code, reason := sip.StatusInternalServerError, "Server Internal Error"
		var st interface{ SIPStatus() int }
		if errors.As(err, &st) && st.SIPStatus() == sip.StatusNotAcceptableHere {
			code, reason = sip.StatusNotAcceptableHere, "Not Acceptable Here"
		}
		respond(tx, req, code, reason)
		return
	}
	c.mc = mc
	ms.mu.Lock()
	ms.conns[c.id] = c
	ms.byDlg[dlgKey{c.callID, localTag, remoteTag}] = c
	ms.mu.Unlock()
	if err := ms.accept(t, tx, req, answer, localTag); err != nil {
		ms.drop(c)
		return
	}
	ms.log.Info("media/msr: media connection", "id", c.id, "iface", name, "local", addr)
}

// accept answers req 200 with the session description sdp, our Contact
// on t and, for a new dialog, the To tag localTag ("" in a dialog).
func (ms *mediaServer) accept(t *transport, tx sip.ServerTransaction, req *sip.Request, sdp []byte, localTag string) error {
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", sdp)
	if rt := res.To(); rt != nil && localTag != "" {
		rt.Params.Add("tag", localTag)
	}
	res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: req.Recipient.User,
		Host: t.laddr.Addr().String(), Port: int(t.laddr.Port())}})
	res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	return tx.Respond(res)
}

func (ms *mediaServer) reinvite(t *transport, req *sip.Request, tx sip.ServerTransaction, k dlgKey) {
	ms.mu.Lock()
	c, d := ms.byDlg[k], ms.ctlByDlg[k]
	ms.mu.Unlock()
	if d != nil {
		// A control dialog's session stays as it is: the same offer gets
		// the same answer, any other 488.
		if o, ok, err := parseCFWOffer(req.Body()); !ok || err != nil || o.id != d.id {
			respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here (control dialog unchanged)")
			return
		}
		_ = ms.accept(t, tx, req, d.answer, "")
		return
	}
	if c == nil {
		respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
		return
	}
	if len(req.Body()) == 0 {
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here (offer required)")
		return
	}
	answer, err := c.mc.Update(req.Body())
	if err != nil {
		respond(tx, req, sip.StatusNotAcceptableHere, "Not Acceptable Here")
		return
	}
	_ = ms.accept(c.tr, tx, req, answer, "")
}

func (ms *mediaServer) bye(req *sip.Request, tx sip.ServerTransaction) {
	from, to, callID := req.From(), req.To(), req.CallID()
	if from == nil || to == nil || callID == nil {
		respond(tx, req, sip.StatusBadRequest, "Bad Request")
		return
	}
	remoteTag, _ := from.Params.Get("tag")
	localTag, _ := to.Params.Get("tag")
	ms.mu.Lock()
	c := ms.byDlg[dlgKey{callID.Value(), localTag, remoteTag}]
	d := ms.ctlByDlg[dlgKey{callID.Value(), localTag, remoteTag}]
	ms.mu.Unlock()
	if d != nil {
		ms.endControl(d)
		respond(tx, req, sip.StatusOK, "OK")
		return
	}
	if c == nil {
		respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
		return
	}
	ms.drop(c)
	respond(tx, req, sip.StatusOK, "OK")
}

// drop ends a connection: unjoined, forgotten, ports freed. Idempotent.
func (ms *mediaServer) drop(c *connection) {
	ms.mu.Lock()
	if ms.conns[c.id] != c {
		ms.mu.Unlock()
		return
	}
	delete(ms.conns, c.id)
	delete(ms.byDlg, dlgKey{c.callID, c.localTag, c.remoteTag})
	if p := c.peer; p != nil {
		p.mc.ForwardTo(nil)
		p.peer, p.dir = nil, ""
		c.peer = nil
	}
	ms.mu.Unlock()
	c.mc.Close()
}

// inactive is the media's inactivity callback: BYE the peer, free.
func (ms *mediaServer) inactive(c *connection, reason string) {
	ms.log.Info("media/msr: media connection inactive, sending BYE", "id", c.id, "reason", reason)
	ms.mu.Lock()
	live := ms.conns[c.id] == c
	ms.mu.Unlock()
	if !live {
		return
	}
	ms.drop(c)
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	req := sip.NewRequest(sip.BYE, c.target)
	req.SetTransport("UDP")
	req.SetDestination(c.source)
	fromH := &sip.FromHeader{Address: c.from, Params: sip.NewParams()}
	fromH.Params.Add("tag", c.localTag)
	toH := &sip.ToHeader{Address: c.to, Params: sip.NewParams()}
	toH.Params.Add("tag", c.remoteTag)
	cid := sip.CallIDHeader(c.callID)
	maxFwd := sip.MaxForwardsHeader(70)
	req.AppendHeader(fromH)
	req.AppendHeader(toH)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.BYE})
	req.AppendHeader(&maxFwd)
	c.tr.mu.Lock()
	closing := c.tr.closing
	if !closing {
		c.tr.users.Add(1)
	}
	c.tr.mu.Unlock()
	if closing {
		return
	}
	defer c.tr.users.Done()
	if _, err := c.tr.client.Do(ctx, req); err != nil {
		ms.log.Info("media/msr: BYE not confirmed", "id", c.id, "err", err)
	}
}

// closeAll ends every connection (the agent stops).
func (ms *mediaServer) closeAll() {
	ms.mu.Lock()
	list := make([]*connection, 0, len(ms.conns))
	for _, c := range ms.conns {
		list = append(list, c)
	}
	// Control dialogs are forgotten (no BYE: the agent stops); their
	// channels close with the listener.
	clear(ms.ctlDlgs)
	clear(ms.ctlByDlg)
	ms.mu.Unlock()
	for _, c := range list {
		ms.drop(c)
	}
}

// lookup finds a connection by RFC 6230 connection-id; the tags are
// accepted in either order (the softswitch may write them from its side).
// Called with ms.mu held.
func (ms *mediaServer) lookup(id string) *connection {
	if c := ms.conns[id]; c != nil {
		return c
	}
	if a, b, ok := strings.Cut(id, ":"); ok {
		return ms.conns[b+":"+a]
	}
	return nil
}

// MediaConnection is one media connection for status and tests.
type MediaConnection struct {
	ID        string `json:"id"`
	Interface string `json:"interface"`
	CallID    string `json:"call_id"`
	JoinedTo  string `json:"joined_to,omitempty"`
	Direction string `json:"direction,omitempty"`
	Received  uint64 `json:"received"`
	Forwarded uint64 `json:"forwarded"`
}

// MediaConnections lists the open media connections.
func (a *Agent) MediaConnections() []MediaConnection {
	ms := a.ms
	if ms == nil {
		return nil
	}
	ms.mu.Lock()
	var out []MediaConnection
	for _, c := range ms.conns {
		mc := MediaConnection{ID: c.id, Interface: c.iface, CallID: c.callID, Direction: string(c.dir)}
		if c.peer != nil {
			mc.JoinedTo = c.peer.id
		}
		mc.Received, mc.Forwarded = c.mc.Counts()
		out = append(out, mc)
	}
	ms.mu.Unlock()
	slices.SortFunc(out, func(a, b MediaConnection) int { return strings.Compare(a.ID, b.ID) })
	return out
}
