// Package fuzz is the core of bench/sipfuzz: it mutates captured SIP
// messages (byte flips, header duplication and deletion, truncation, huge
// values, CRLF injection, random Content-Length, splicing) and sends them
// to a running SIP server over UDP and TCP, bounded in count and time,
// while a monitor registers a real user with digest authentication every
// second. It checks nothing about the server's answers: the caller checks
// the process (alive, memory) and the monitor's figures. It uses the
// standard library only, so both the sipfuzz command and the end-to-end
// test in cmd/outpostd run the same code.
package fuzz

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// LoadSeeds reads every file of dir as one seed message.
func LoadSeeds(dir string) ([][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sip"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var seeds [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		seeds = append(seeds, b)
	}
	return seeds, nil
}

// Mutator makes mutated messages from seeds. Not safe for concurrent use.
type Mutator struct {
	r     *rand.Rand
	seeds [][]byte
}

// NewMutator returns a Mutator drawing from seeds with the given seed.
func NewMutator(seeds [][]byte, seed uint64) *Mutator {
	return &Mutator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seeds: seeds}
}

// Ops names the mutations, in the order Next picks them by index.
var Ops = []string{"flip", "dup-header", "del-header", "truncate", "huge-value", "crlf-inject", "content-length", "splice", "none"}

// Next returns a new message: a seed with one to three mutations, and the
// first mutation's index in Ops.
func (m *Mutator) Next() ([]byte, int) {
	msg := slices.Clone(m.seeds[m.r.IntN(len(m.seeds))])
	first := -1
	for range 1 + m.r.IntN(3) {
		op := m.r.IntN(len(Ops))
		if first < 0 {
			first = op
		}
		msg = m.apply(op, msg)
	}
	return msg, first
}

func (m *Mutator) apply(op int, msg []byte) []byte {
	if len(msg) == 0 {
		return msg
	}
	r := m.r
	lines := bytes.Split(msg, []byte("\r\n"))
	headerEnd := slices.IndexFunc(lines, func(l []byte) bool { return len(l) == 0 })
	if headerEnd < 1 {
		headerEnd = len(lines)
	}
	pickHeader := func() int { // a header line, never the start line
		if headerEnd <= 1 {
			return 0
		}
		return 1 + r.IntN(headerEnd-1)
	}
	switch Ops[op] {
	case "flip": // 1 to 8 random bytes, random values or bit flips
		for range 1 + r.IntN(8) {
			i := r.IntN(len(msg))
			if r.IntN(2) == 0 {
				msg[i] ^= 1 << r.IntN(8)
			} else {
				msg[i] = byte(r.IntN(256))
			}
		}
		return msg
	case "dup-header": // one header repeated 1 to 100 times
		i := pickHeader()
		n := 1 + r.IntN(100)
		if r.IntN(10) == 0 {
			n = 1000 + r.IntN(2000)
		}
		dup := make([][]byte, n)
		for k := range dup {
			dup[k] = lines[i]
		}
		lines = slices.Insert(lines, i, dup...)
	case "del-header":
		if i := pickHeader(); i > 0 {
			lines = slices.Delete(lines, i, i+1)
		}
	case "truncate":
		return msg[:r.IntN(len(msg))]
	case "huge-value": // a header value of 1 KiB to 60 KiB, or a huge number
		i := pickHeader()
		name, _, _ := bytes.Cut(lines[i], []byte(":"))
		var v []byte
		switch r.IntN(3) {
		case 0:
			v = bytes.Repeat([]byte{"A;<@\"%,=9"[r.IntN(9)]}, 1024+r.IntN(60*1024))
		case 1:
			v = []byte(strconv.FormatUint(r.Uint64(), 10) + strconv.FormatUint(r.Uint64(), 10))
		default:
			v = []byte("-" + strconv.Itoa(r.IntN(1<<31)))
		}
		lines[i] = append(append(slices.Clone(name), ": "...), v...)
	case "crlf-inject": // a CR, LF or CRLF (or an empty line) inside a line
		i := r.IntN(len(lines))
		if len(lines[i]) > 0 {
			at := r.IntN(len(lines[i]))
			inj := [][]byte{[]byte("\r\n"), []byte("\n"), []byte("\r"), []byte("\r\n\r\n"), []byte("\r\n ")}[r.IntN(5)]
			lines[i] = slices.Concat(lines[i][:at], inj, lines[i][at:])
		}
	case "content-length": // a random, negative, huge or second Content-Length
		vals := []string{"0", "-1", "99999999999999999999", strconv.Itoa(r.IntN(70000)), " ", "abc", strconv.Itoa(r.IntN(10))}
		cl := []byte("Content-Length: " + vals[r.IntN(len(vals))])
		if i := slices.IndexFunc(lines[:headerEnd], func(l []byte) bool {
			return bytes.HasPrefix(bytes.ToLower(l), []byte("content-length"))
		}); i > 0 && r.IntN(3) > 0 {
			lines[i] = cl
		} else {
			lines = slices.Insert(lines, max(1, headerEnd), cl)
		}
	case "splice": // the head of this message, the tail of another
		other := m.seeds[r.IntN(len(m.seeds))]
		return slices.Concat(msg[:r.IntN(len(msg))], other[r.IntN(len(other)):])
	}
	return bytes.Join(lines, []byte("\r\n"))
}
