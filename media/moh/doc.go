// Package moh is the box's music on hold: the recording the relay plays
// to a held party, as G.711 µ-law samples at 8 kHz.
//
// The image ships Default (default.ulaw, embedded: a quiet arpeggio of
// about 8 s, made by gen.go); the document replaces it with a WAV file
// (media.music_on_hold), read by ParseWAV: 8 kHz mono, 16-bit PCM,
// µ-law or A-law, at most MaxSeconds. The WAV reader is hand-written:
// RIFF with three formats is a few dozen lines, and the libraries that
// read WAV bring resampling and formats the box refuses anyway.
package moh
