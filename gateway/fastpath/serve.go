package fastpath

import (
	"github.com/emiago/sipgo/sip"
)

// The datagrams of the transactions the path keeps (servertx.go): CANCEL
// and BYE here; INVITE and ACK in invite.go, with their admission.

// filterCancel answers the CANCEL of an INVITE whose transaction the path
// keeps; any other CANCEL goes on to sipgo (whose 481 the gateway sends).
func (f *Path) filterCancel(info sip.TransportReadProps, data []byte) ([]byte, error) {
	req, pass := f.parseOr(info, data)
	if req == nil {
		return pass, nil
	}
	key, keyed := f.serverTxKey(req, info.RemoteAddr.String(), sip.INVITE)
	if !keyed {
		return data, nil
	}
	tx := f.txs.get(key)
	if tx == nil {
		return data, nil
	}
	tx.cancel(req)
	return nil, nil
}

// filterBye runs a BYE's transaction: a new one goes to the handler, a
// retransmission to its transaction.
func (f *Path) filterBye(info sip.TransportReadProps, data []byte) ([]byte, error) {
	sock, req, pass := f.requestOn(info, data)
	if req == nil {
		return pass, nil
	}
	src := info.RemoteAddr.String()
	key, keyed := f.serverTxKey(req, src, sip.BYE)
	if !keyed {
		return data, nil
	}
	if tx := f.txs.get(key); tx != nil {
		tx.retransmission()
		return nil, nil
	}
	req.SetSource(src)
	req.SetTransport("UDP")
	f.serveRequest(req, key, sock, info, f.serve.Bye)
	return nil, nil
}

// serverTxKey is the key of the transaction of method req belongs to (an
// INVITE's CANCEL and ACK belong to the INVITE's), from source src; false
// when the path keeps no transactions or the branch is not an RFC 3261
// one (sipgo matches those).
func (f *Path) serverTxKey(req *sip.Request, src string, method sip.RequestMethod) (string, bool) {
	if f.serve == nil {
		return "", false
	}
	branch, _ := req.Via().Params.Get("branch")
	if len(branch) <= len(sip.RFC3261BranchMagicCookie) || branch[:len(sip.RFC3261BranchMagicCookie)] != sip.RFC3261BranchMagicCookie {
		return "", false
	}
	return txKey(branch, src, string(method)), true
}

// serveRequest starts the server transaction of a new request and its
// handler.
func (f *Path) serveRequest(req *sip.Request, key string, sock udpSocket, info sip.TransportReadProps,
	handler func(*sip.Request, sip.ServerTransaction)) {
	tx := &serverTx{f: f, key: key, req: req, method: req.Method, local: info.LocalAddr, pc: sock.pc,
		dst: info.RemoteAddr}
	if !f.txs.add(tx) {
		return // cannot happen: the read goroutine looked it up
	}
	if tx.invite() {
		f.txs.trying.add(tx, sip.Timer_1xx)
	}
	f.handlers.Go(func() {
		handler(req, tx)
		tx.handled()
	})
}
