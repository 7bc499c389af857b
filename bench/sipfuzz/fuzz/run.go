package fuzz

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one fuzzing run. Zero fields mean defaults.
type Config struct {
	// Target is the server's UDP host:port; TCPTarget its TCP one
	// (default Target).
	Target, TCPTarget string
	// N is the number of messages to send (default 1,000,000); the run
	// also ends after Duration (default 10 min) or when ctx ends.
	N        int
	Duration time.Duration
	// Rate caps messages per second (0 = as fast as the senders go).
	Rate int
	// TCPEvery sends every TCPEvery-th message over TCP (default 10).
	TCPEvery int
	// TCPPerConn is how many messages share one TCP connection before it
	// is replaced (default 50); a connection the server closes is
	// replaced at once.
	TCPPerConn int
	// Seeds are the messages to mutate; Seed makes the run repeatable.
	Seeds [][]byte
	Seed  uint64
	// Local is the address the fuzz sockets bind (default 127.0.0.1:0).
	Local string
	// Monitor, when its User is set, registers every second.
	Monitor Monitor
	// ListenPacket and Dial make sockets (default net.ListenPacket and
	// net.Dialer.Dial); a test passes ones that enter a namespace.
	ListenPacket func(network, addr string) (net.PacketConn, error)
	Dial         func(network, addr string) (net.Conn, error)
}

// Result is what a run did.
type Result struct {
	Sent, SentUDP, SentTCP uint64
	// Unsent counts messages the kernel refused (UDP over 64 KiB) and TCP
	// writes the server cut off.
	Unsent    uint64
	Answers   uint64 // datagrams the server sent back to the fuzz socket
	TCPConns  uint64
	Elapsed   time.Duration
	ByOp      []uint64 // messages per first mutation (index of Ops)
	Registers MonitorResult
}

// Rate is messages per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

func (c *Config) defaults() {
	if c.N == 0 {
		c.N = 1_000_000
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Minute
	}
	if c.TCPEvery == 0 {
		c.TCPEvery = 10
	}
	if c.TCPPerConn == 0 {
		c.TCPPerConn = 50
	}
	if c.TCPTarget == "" {
		c.TCPTarget = c.Target
	}
	if c.Local == "" {
		c.Local = "127.0.0.1:0"
	}
	if c.ListenPacket == nil {
		c.ListenPacket = net.ListenPacket
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 2 * time.Second}
		c.Dial = d.Dial
	}
}

// Run sends cfg.N mutated messages (or as many as fit in cfg.Duration)
// while the monitor registers, and returns the figures.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	if len(cfg.Seeds) == 0 {
		return Result{}, errors.New("fuzz: no seeds")
	}
	dst, err := net.ResolveUDPAddr("udp", cfg.Target)
	if err != nil {
		return Result{}, err
	}
	pc, err := cfg.ListenPacket("udp", cfg.Local)
	if err != nil {
		return Result{}, err
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	var res Result
	var answers atomic.Uint64
	var wg sync.WaitGroup
	// Drain what the server answers so the socket buffer never fills.
	wg.Go(func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP errors from earlier sends
			}
			answers.Add(1)
		}
	})
	var mon *monitor
	if cfg.Monitor.User != "" {
		mon = newMonitor(cfg.Monitor, cfg.Target, cfg.ListenPacket)
		wg.Go(func() { mon.run(ctx) })
	}

	mut := NewMutator(cfg.Seeds, cfg.Seed)
	res.ByOp = make([]uint64, len(Ops))
	tcp := &tcpSender{dial: cfg.Dial, target: cfg.TCPTarget, perConn: cfg.TCPPerConn}
	defer tcp.close()
	start := time.Now()
	var pace time.Duration
	if cfg.Rate > 0 {
		pace = time.Second / time.Duration(cfg.Rate)
	}
	for i := 0; i < cfg.N; i++ {
		if i%256 == 0 {
			if ctx.Err() != nil {
				break
			}
			if pace > 0 { // pace in batches of 256: sleeping per message costs more than sending
				if ahead := time.Duration(i)*pace - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		msg, op := mut.Next()
		res.ByOp[op]++
		res.Sent++
		if i%cfg.TCPEvery == cfg.TCPEvery-1 {
			res.SentTCP++
			if !tcp.send(msg) {
				res.Unsent++
			}
			continue
		}
		res.SentUDP++
		if _, err := pc.WriteTo(msg, dst); err != nil {
			res.Unsent++
			if !errors.Is(err, syscall.EMSGSIZE) && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOBUFS) {
				return res, err
			}
		}
	}
	res.Elapsed = time.Since(start)
	res.TCPConns = tcp.conns
	// Let the monitor see the server settle for a moment, then stop.
	cancel()
	pc.Close()
	wg.Wait()
	res.Answers = answers.Load()
	if mon != nil {
		res.Registers = mon.result()
	}
	return res, nil
}

// tcpSender writes messages on a connection it replaces every perConn
// messages or when the server closes it. What the server answers is read
// and dropped by a goroutine per connection.
type tcpSender struct {
	dial    func(network, addr string) (net.Conn, error)
	target  string
	perConn int
	c       net.Conn
	n       int
	conns   uint64
}

func (s *tcpSender) send(msg []byte) bool {
	if s.c == nil || s.n >= s.perConn {
		s.close()
		c, err := s.dial("tcp", s.target)
		if err != nil {
			return false
		}
		s.c, s.n = c, 0
		s.conns++
		go func() { // drain answers until the connection closes
			buf := make([]byte, 16384)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	s.n++
	s.c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := s.c.Write(msg); err != nil {
		s.close()
		return false
	}
	return true
}

func (s *tcpSender) close() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}
