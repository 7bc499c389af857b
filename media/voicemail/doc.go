// Package voicemail is the box's own voicemail: mailboxes on the data
// partition, the line that answers a caller (greeting, beep, recording),
// message waiting counts, and the retrieval menu.
//
// Decisions:
//   - A message is a WAV file (16-bit PCM, mono, 8 kHz: G.711 decoded)
//     under Dir/<mailbox>/, indexed by the appliance's SQLite store
//     (Index). The index entry is written (state recording) before the
//     first sample, the file is synced with a header covering what it
//     holds every second, and the entry becomes "new" after the final
//     sync: a crash loses at most the last second, and New repairs and
//     keeps an interrupted recording.
//   - A Line is plain RTP/AVP, G.711 with telephone-event, on a port pair
//     of the kernel's ephemeral range on the box's own address. The
//     B2BUA always anchors a voicemail call in the media relay first, so
//     SRTP, latching, codec choice and media timeouts toward the caller
//     are the relay's; the line only ever talks to the relay. It is not
//     the relay's Endpoint, which forwards between endpoints: a line is a
//     sink and a paced source, with its own digits.
//   - Prompts are recordings shipped in the image (prompts/, spoken by
//     flite at build time of the files, see prompts/gen.go): no speech
//     synthesis on the box. Numbers are read digit by digit.
//   - Quotas: messages per mailbox and audio bytes in all. A recording
//     reserves its maximum length against the total while it runs, so
//     concurrent callers cannot overshoot it; a full mailbox is told to
//     the caller ("mailbox full") and counted.
package voicemail
