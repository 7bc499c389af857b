// Package media will hold the RTP relay, SDP rewriting, G.711 mediation and
// the MSR agent (DESIGN.md §1–2). It is empty until the media issue; it
// exists so the repository has the layout the design describes.
package media
