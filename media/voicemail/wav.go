package voicemail

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// A message is a RIFF/WAVE file of 16-bit PCM, mono, 8 kHz: what G.711
// decodes to, and what every player and mail client opens. The header is
// rewritten at each sync with the sizes written so far, so the file is a
// complete WAV up to its last sync whatever happens after it.

const (
	sampleRate = 8000
	headerLen  = 44
	// bytesPerSecond of the stored PCM.
	bytesPerSecond = 2 * sampleRate
)

// wavHeader is the 44-byte header of dataLen bytes of PCM.
func wavHeader(dataLen uint32) []byte {
	h := make([]byte, headerLen)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36+dataLen)
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1) // PCM
	binary.LittleEndian.PutUint16(h[22:], 1) // mono
	binary.LittleEndian.PutUint32(h[24:], sampleRate)
	binary.LittleEndian.PutUint32(h[28:], bytesPerSecond)
	binary.LittleEndian.PutUint16(h[32:], 2)  // block align
	binary.LittleEndian.PutUint16(h[34:], 16) // bits per sample
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], dataLen)
	return h
}

// wavWriter appends PCM to a new file.
type wavWriter struct {
	f      *os.File
	buf    *bufio.Writer
	n      int64 // PCM bytes written (buffered included)
	synced int64 // PCM bytes on disk with a header that covers them
	max    int64 // the size limit in PCM bytes
	frame  []byte
}

// createWAV creates path (which must not exist) with an empty header.
func createWAV(path string, maxBytes int64) (*wavWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(wavHeader(0)); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return &wavWriter{f: f, buf: bufio.NewWriterSize(f, 16<<10), max: maxBytes}, nil
}

// errTooLong: the message reached its maximum length.
var errTooLong = errors.New("voicemail: message at its maximum length")

// write appends samples; past the limit it writes what fits and returns
// errTooLong.
func (w *wavWriter) write(samples []int16) error {
	room := (w.max - w.n) / 2
	if room <= 0 {
		return errTooLong
	}
	cut := len(samples) > int(room)
	if cut {
		samples = samples[:room]
	}
	w.frame = w.frame[:0]
	for _, s := range samples {
		w.frame = binary.LittleEndian.AppendUint16(w.frame, uint16(s))
	}
	if _, err := w.buf.Write(w.frame); err != nil {
		return err
	}
	w.n += int64(len(w.frame))
	if cut {
		return errTooLong
	}
	return nil
}

// sync makes what was written durable: the data, then a header covering
// it, then fdatasync. A crash after it loses nothing before it.
func (w *wavWriter) sync() error {
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("voicemail: writing message: %w", err)
	}
	if _, err := w.f.WriteAt(wavHeader(uint32(w.n)), 0); err != nil {
		return fmt.Errorf("voicemail: writing message header: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("voicemail: syncing message: %w", err)
	}
	w.synced = w.n
	return nil
}

// truncate drops the last n PCM bytes (trailing silence) before close.
func (w *wavWriter) truncate(n int64) error {
	if err := w.buf.Flush(); err != nil {
		return err
	}
	w.n = max(0, w.n-n)
	return w.f.Truncate(headerLen + w.n)
}

// close syncs and closes the file; it is safe after a failed write (the
// header then covers what reached the disk).
func (w *wavWriter) close() error {
	err := w.sync()
	if err != nil {
		// The buffer could not be written: keep what did reach the disk.
		if st, e := w.f.Stat(); e == nil {
			w.n = max(0, st.Size()-headerLen)
			w.n -= w.n % 2
			_, _ = w.f.WriteAt(wavHeader(uint32(w.n)), 0)
			_ = w.f.Sync()
		}
	}
	return errors.Join(err, w.f.Close())
}

// readWAV returns the samples of a message file the box wrote (or
// repaired): 16-bit PCM mono 8 kHz with the 44-byte header.
func readWAV(path string) ([]int16, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePCM(b)
}

func parsePCM(b []byte) ([]int16, error) {
	if len(b) < headerLen || string(b[0:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		return nil, errors.New("voicemail: not a message file")
	}
	if binary.LittleEndian.Uint16(b[20:]) != 1 || binary.LittleEndian.Uint16(b[22:]) != 1 ||
		binary.LittleEndian.Uint32(b[24:]) != sampleRate || binary.LittleEndian.Uint16(b[34:]) != 16 {
		return nil, errors.New("voicemail: message file is not 16-bit PCM mono at 8 kHz")
	}
	n := min(int(binary.LittleEndian.Uint32(b[40:])), len(b)-headerLen)
	out := make([]int16, n/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[headerLen+2*i:]))
	}
	return out, nil
}

// repairWAV makes the header of an interrupted recording cover every
// whole sample on disk, and returns the PCM length. A file too short to
// hold a header is an error (the recording never started).
func repairWAV(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() < headerLen {
		return 0, fmt.Errorf("voicemail: %s: %d bytes, no header", path, st.Size())
	}
	n := st.Size() - headerLen
	n -= n % 2
	if err := f.Truncate(headerLen + n); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(wavHeader(uint32(n)), 0); err != nil {
		return 0, err
	}
	return n, f.Sync()
}
