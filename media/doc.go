// Package media groups the box's media plane (docs/design.md §1–2); the code
// lives in its sub-packages:
//
//   - media/relay: the RTP/RTCP relay that anchors a call's audio between
//     two legs (ports, latching, hold, G.711 transcoding, inactivity);
//   - media/sdprewrite: tolerant SDP parsing and rewriting for the relay;
//   - media/g711: µ-law/A-law/linear conversion tables;
//   - media/rtpstats: RFC 3550 receive statistics (loss, jitter);
//   - media/msr and media/selection: the MSR agent and media-resource
//     selection.
//
// The gateway reaches the relay only through interfaces it defines
// itself; media imports netcfg at most, never gateway or appliance.
package media
