// Package g711 converts ITU-T G.711 audio between µ-law, A-law and 16-bit
// linear PCM with lookup tables, so that the media relay can bridge a
// µ-law phone and an A-law gateway by rewriting each RTP payload in place.
//
// Design decisions:
//
//   - µ-law ↔ A-law goes through the direct code-to-code tables of G.711
//     (Tables 3 and 4 of the Recommendation, as corrected in the ITU-T
//     G.191 software tools), not through linear PCM: the tables are what
//     the standard specifies, and they differ from a decode/re-encode in
//     how ties between two codes are broken. Neither law is a refinement of
//     the other (µ-law is finer near zero, A-law in the middle segments),
//     so no round trip is transparent: A → µ → A and µ → A → µ move a code
//     by at most one magnitude step, which the tests check.
//   - Every table is built once at package initialisation from the
//     magnitude tables and the coding rules (sign bit, even-bit inversion
//     of A-law, bit inversion of µ-law), so a conversion is one indexed
//     load per sample and the per-packet functions never allocate.
//   - Linear PCM uses the usual 16-bit scale (µ-law ±32124, A-law ±32256).
//     The encoders (linear → law) exist for tests and tone generation; the
//     relay only needs the law-to-law tables.
//
// The package does not resample, mix, or handle any other codec, and it
// imports nothing of this module.
package g711
