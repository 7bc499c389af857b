// Package sipauth is Outpost's one SIP digest client: it answers the 401
// and 407 challenges of a registrar or proxy (RFC 3261 §22.2, RFC 7616,
// RFC 8760) for gateway/upstream's registrations to HQ, media/msr's
// registrations to the media servers, the image boot test and the load
// tools.
//
// It works on header values, not on messages, so that callers without
// sipgo (the image boot test writes wire text) use it too. It keeps the
// last challenge with qop=auth and answers it again with the next nonce
// count, so a refresh can authorise pre-emptively instead of costing a
// 401 round trip; a challenge without qop is answered once only (without
// a nonce count a second answer is a replay).
//
// The server side (challenging and verifying) is gateway/digest's. The
// package imports nothing of Outpost.
package sipauth
