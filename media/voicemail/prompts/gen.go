//go:build ignore

// gen writes the voicemail prompts as µ-law at 8 kHz (*.ulaw), spoken by
// flite's "kal" voice (8 kHz, BSD-style licence): go run gen.go, with
// flite installed. The files are committed; the build does not need
// flite.
package main

import (
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/moh"
)

var prompts = map[string]string{
	"greeting":     "The person you are calling is not available. Please leave a message after the tone. Press pound when you are done.",
	"recorded":     "Your message has been recorded. Goodbye.",
	"full":         "This mailbox is full and cannot take new messages. Goodbye.",
	"unavailable":  "Voicemail is not available. Goodbye.",
	"goodbye":      "Goodbye.",
	"you-have":     "You have",
	"new-messages": "new messages.",
	"new-message":  "new message.",
	"old-messages": "saved messages.",
	"old-message":  "saved message.",
	"no-messages":  "You have no messages.",
	"message":      "Message",
	"from":         "from",
	"unknown":      "an unknown caller",
	"received":     "received at",
	"menu":         "Press 1 to play it again, 7 to delete it, 9 to save it, or pound for the next message.",
	"deleted":      "Message deleted.",
	"saved":        "Message saved.",
	"no-more":      "You have no more messages.",
	"enter-pin":    "Please enter your PIN, then press pound.",
	"wrong-pin":    "That PIN is not correct.",
	"locked":       "Too many wrong PINs. Try again later. Goodbye.",
	"enter-box":    "Please enter the mailbox number, then press pound.",
	"no-box":       "There is no such mailbox.",
	"main-menu":    "Press 1 to hear your messages, 3 to record your greeting, 5 to set your PIN, or star to hang up.",
	"new-pin":      "Enter a new PIN of four to ten digits, then press pound.",
	"bad-pin":      "A PIN has four to ten digits. Your PIN was not changed.",
	"pin-saved":    "Your PIN has been saved.",
	"record-greet": "Record your greeting after the tone, then press pound.",
	"greet-saved":  "Your greeting has been saved.",
	"0":            "zero",
	"1":            "one",
	"2":            "two",
	"3":            "three",
	"4":            "four",
	"5":            "five",
	"6":            "six",
	"7":            "seven",
	"8":            "eight",
	"9":            "nine",
}

func main() {
	tmp, err := os.MkdirTemp("", "prompts")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for name, text := range prompts {
		wav := filepath.Join(tmp, name+".wav")
		if out, err := exec.Command("flite", "-voice", "kal", "-t", text, "-o", wav).CombinedOutput(); err != nil {
			log.Fatalf("flite %s: %v: %s", name, err, out)
		}
		b, err := os.ReadFile(wav)
		if err != nil {
			log.Fatal(err)
		}
		ulaw, err := moh.ParseWAV(b)
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(name+".ulaw", trim(ulaw), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// trim cuts flite's leading and trailing silence down to 60 ms, so that
// prompts played in a row (a count, a number digit by digit) run on.
func trim(ulaw []byte) []byte {
	const keep, quiet = 480, 300
	loud := func(b byte) bool { v := g711.UlawToLinear(b); return v > quiet || v < -quiet }
	first, last := 0, len(ulaw)
	for first < last && !loud(ulaw[first]) {
		first++
	}
	for last > first && !loud(ulaw[last-1]) {
		last--
	}
	return ulaw[max(0, first-keep):min(len(ulaw), last+keep)]
}
