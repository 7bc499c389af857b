//go:build relaybench

// Command relayd is a bench-only daemon: it runs media/relay without SIP
// and speaks the small part of rtpengine's ng control protocol (bencode
// over UDP: ping, offer, answer, delete, and statistics/list for the
// relay's counters) that the peers' rtpblast generator uses, so that the
// same generator drives rtpengine and our relay in one run. Both legs of
// every session use the one -ip address; an offer is leg A's, an answer
// leg B's. In outpostd the same relay is driven by the B2BUA instead
// (appliance adapts a relay.Session to b2bua.Anchor per call); relayd
// measures the relay alone.
//
// Built only with -tags relaybench: docs/design.md §2's dependency test lets no
// package outside cmd/appliance/media import media, and a bench tool has
// no place in outpostd's dependency graph.
//
//	go build -tags relaybench -o /tmp/relayd ./bench/relayd
//	relayd -ng 127.0.0.51:22224 -ip 127.0.0.51 -ports 30000-49999
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/outpost/outpost/bench/bencode"
	"github.com/outpost/outpost/media/relay"
)

func main() {
	ngAddr := flag.String("ng", "127.0.0.51:22224", "ng control address (UDP)")
	ip := flag.String("ip", "127.0.0.51", "media address (both legs)")
	ports := flag.String("ports", "30000-49999", "RTP port range")
	procs := flag.Int("gomaxprocs", 0, "GOMAXPROCS (0 = runtime default)")
	batch := flag.Int("batch", 0, "relay.Config.Batch: >1 = recvmmsg/sendmmsg with up to N datagrams")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lo, hi, _ := strings.Cut(*ports, "-")
	pmin, _ := strconv.Atoi(lo)
	pmax, _ := strconv.Atoi(hi)
	r, err := relay.New(relay.Config{PortMin: pmin, PortMax: pmax, Batch: *batch}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	addr, err := netip.ParseAddr(*ip)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	conn, err := net.ListenPacket("udp", *ngAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(ctx); err != nil {
			log.Error("relay", "err", err)
		}
	})
	wg.Go(func() { <-ctx.Done(); conn.Close() })
	d := &daemon{r: r, addr: addr, calls: map[string]*relay.Session{}}
	buf := make([]byte, 65536)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			break
		}
		if reply := d.handle(buf[:n]); reply != nil {
			_, _ = conn.WriteTo(reply, from)
		}
	}
	wg.Wait()
}

type daemon struct {
	r     *relay.Relay
	addr  netip.Addr
	calls map[string]*relay.Session
}

// handle answers one ng message: "COOKIE d...e" → "COOKIE d...e".
func (d *daemon) handle(msg []byte) []byte {
	sp := bytes.IndexByte(msg, ' ')
	if sp < 0 {
		return nil
	}
	cookie := msg[:sp]
	v, _, err := bencode.Decode(msg, sp+1)
	req, ok := v.(map[string]any)
	var res map[string]any
	if err != nil || !ok {
		res = map[string]any{"result": "error", "error-reason": "bad message"}
	} else {
		res = d.command(req)
	}
	var b bytes.Buffer
	b.Write(cookie)
	b.WriteByte(' ')
	bencode.Encode(&b, res)
	return b.Bytes()
}

func (d *daemon) command(req map[string]any) map[string]any {
	fail := func(err error) map[string]any {
		return map[string]any{"result": "error", "error-reason": err.Error()}
	}
	str := func(k string) string { s, _ := req[k].(string); return s }
	cid := str("call-id")
	switch str("command") {
	case "ping":
		return map[string]any{"result": "pong"}
	case "offer":
		s := d.calls[cid]
		if s == nil {
			var err error
			if s, err = d.r.NewSession(relay.SessionConfig{ID: cid, LocalA: d.addr, LocalB: d.addr}); err != nil {
				return fail(err)
			}
			d.calls[cid] = s
		}
		out, err := s.Offer(relay.A, []byte(str("sdp")))
		if err != nil {
			return fail(err)
		}
		return map[string]any{"result": "ok", "sdp": string(out)}
	case "answer":
		s := d.calls[cid]
		if s == nil {
			return fail(errors.New("unknown call"))
		}
		out, err := s.Answer(relay.B, []byte(str("sdp")))
		if err != nil {
			return fail(err)
		}
		return map[string]any{"result": "ok", "sdp": string(out)}
	case "delete":
		if s := d.calls[cid]; s != nil {
			s.Close()
			delete(d.calls, cid)
		}
		return map[string]any{"result": "ok"}
	case "statistics", "list":
		st := d.r.Stats()
		return map[string]any{"result": "ok", "sessions": st.Sessions, "ports": st.PortsInUse,
			"relayed": int(st.Relayed[0] + st.Relayed[1]), "refused": int(st.Refused), "dropped": int(st.Dropped)}
	}
	return fail(fmt.Errorf("unsupported command %q", str("command")))
}
