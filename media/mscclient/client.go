package mscclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/outpost/outpost/media/msr"
)

// The mixer package this client speaks.
const (
	MixerPackage     = "msc-mixer/1.0"
	mixerNamespace   = "urn:ietf:params:xml:ns:msc-mixer"
	mixerContentType = "application/msc-mixer+xml"
)

// Defaults of Config.
const (
	DefaultKeepAlive = 30 * time.Second
	DefaultTimeout   = 5 * time.Second
)

// ErrClosed: the channel is closed (by Close, by the server, or after a
// failure; Conn.Err says which).
var ErrClosed = errors.New("mscclient: control channel closed")

// StatusError is a CFW response other than 200 (RFC 6230 §9.3: 403 before
// SYNC, 420 unsupported package…).
type StatusError struct {
	Method string
	Status int
}

func (e *StatusError) Error() string {
	return "mscclient: " + e.Method + " answered " + strconv.Itoa(e.Status)
}

// Config describes a channel.
type Config struct {
	Addr netip.AddrPort // the MSR's control address
	// DialogID is sent in SYNC; "" = a random token.
	DialogID string
	// KeepAlive is asked for in SYNC (default 30 s); K-ALIVE goes out at a
	// third of what the server grants.
	KeepAlive time.Duration
	// Timeout bounds connecting and each transaction (default 5 s).
	Timeout time.Duration
	// Local, when valid, is the address the connection leaves from (the
	// MSR accepts channels only from its servers' addresses).
	Local netip.Addr
	Log   *slog.Logger // nil = slog.Default()
}

func (c Config) withDefaults() Config {
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.DialogID == "" {
		c.DialogID = token()
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Conn is one synchronised control channel. Its goroutines (reader,
// keep-alive) end with Close or with the channel's failure.
type Conn struct {
	cfg  Config
	nc   net.Conn
	keep time.Duration // the Keep-Alive the server granted

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	pending map[string]chan *msr.Frame
	err     error
	done    chan struct{}
	wg      sync.WaitGroup
}

// Dial connects to cfg.Addr and synchronises the channel (SYNC asking for
// msc-mixer/1.0). The returned Conn is ready for Join.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	d := net.Dialer{Timeout: cfg.Timeout}
	if cfg.Local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: cfg.Local.AsSlice()}
	}
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("mscclient: connecting to %s: %w", cfg.Addr, err)
	}
	c := &Conn{cfg: cfg, nc: nc, pending: map[string]chan *msr.Frame{}, done: make(chan struct{}), keep: cfg.KeepAlive}
	c.wg.Add(1)
	go c.read()
	res, err := c.do(ctx, &msr.Frame{Method: "SYNC", Header: []msr.Field{
		{Name: "Dialog-ID", Value: cfg.DialogID},
		{Name: "Keep-Alive", Value: strconv.Itoa(int(cfg.KeepAlive / time.Second))},
		{Name: "Packages", Value: MixerPackage},
	}})
	if err == nil && res.Status != 200 {
		err = &StatusError{Method: "SYNC", Status: res.Status}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("mscclient: SYNC with %s: %w", cfg.Addr, err)
	}
	if v, ok := res.Get("Keep-Alive"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.keep = time.Duration(n) * time.Second
		}
	}
	c.wg.Add(1)
	go c.keepAlive()
	return c, nil
}

// Addr is the MSR's control address.
func (c *Conn) Addr() netip.AddrPort { return c.cfg.Addr }

// Done is closed when the channel is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the channel closed (nil while open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the channel and waits for its goroutines.
func (c *Conn) Close() {
	c.fail(ErrClosed)
	c.wg.Wait()
}

// fail closes the channel once, with err as the reason.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, ch := range pending {
		close(ch)
	}
}

// KeepAlive sends K-ALIVE and waits for its 200.
func (c *Conn) KeepAlive(ctx context.Context) error {
	res, err := c.do(ctx, &msr.Frame{Method: "K-ALIVE"})
	if err == nil && res.Status != 200 {
		err = &StatusError{Method: "K-ALIVE", Status: res.Status}
	}
	return err
}

// Join bridges connections id1 and id2 both ways (RFC 6505 §4.2.2.1).
func (c *Conn) Join(ctx context.Context, id1, id2 string) error {
	return c.mixer(ctx, "join", id1, id2)
}

// Unjoin stops the media between id1 and id2 (RFC 6505 §4.2.2.3).
func (c *Conn) Unjoin(ctx context.Context, id1, id2 string) error {
	return c.mixer(ctx, "unjoin", id1, id2)
}

func (c *Conn) mixer(ctx context.Context, op, id1, id2 string) error {
	st, err := c.Control(ctx, MixerBody(op, id1, id2))
	if err != nil {
		return fmt.Errorf("mscclient: %s %s %s at %s: %w", op, id1, id2, c.cfg.Addr, err)
	}
	if st.Status != 200 {
		return fmt.Errorf("mscclient: %s %s %s at %s: %w", op, id1, id2, c.cfg.Addr, &MixerError{Status: st.Status, Reason: st.Reason})
	}
	return nil
}

// Control sends one msc-mixer/1.0 CONTROL with body and returns the
// package's response.
func (c *Conn) Control(ctx context.Context, body []byte) (Response, error) {
	res, err := c.do(ctx, &msr.Frame{Method: "CONTROL", Header: []msr.Field{
		{Name: "Control-Package", Value: MixerPackage},
		{Name: "Content-Type", Value: mixerContentType},
	}, Body: body})
	if err != nil {
		return Response{}, err
	}
	if res.Status != 200 {
		return Response{}, &StatusError{Method: "CONTROL", Status: res.Status}
	}
	return ParseResponse(res.Body)
}

// do sends a request and waits for the response with its transaction id.
func (c *Conn) do(ctx context.Context, req *msr.Frame) (*msr.Frame, error) {
	req.TransID = token()
	ch := make(chan *msr.Frame, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[req.TransID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, req.TransID)
		}
		c.mu.Unlock()
	}()
	if err := c.write(req); err != nil {
		return nil, err
	}
	t := time.NewTimer(c.cfg.Timeout)
	defer t.Stop()
	select {
	case res, ok := <-ch:
		if !ok {
			return nil, c.Err()
		}
		return res, nil
	case <-t.C:
		// A channel that does not answer is dead for every call on it.
		err := fmt.Errorf("mscclient: no answer to %s within %v: %w", req.Method, c.cfg.Timeout, context.DeadlineExceeded)
		c.fail(err)
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) write(f *msr.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := c.nc.Write(f.Marshal()); err != nil {
		err = fmt.Errorf("mscclient: writing %s: %w", f.Method, err)
		c.fail(err)
		return err
	}
	return nil
}

// read owns the reading side: responses go to their waiters, the
// server's K-ALIVE and REPORT are answered.
func (c *Conn) read() {
	defer c.wg.Done()
	r := bufio.NewReader(c.nc)
	for {
		f, err := msr.ReadFrame(r)
		if err != nil {
			c.fail(fmt.Errorf("mscclient: channel to %s: %w", c.cfg.Addr, err))
			return
		}
		if f.Method == "" {
			// Under the lock: fail closes the waiters' channels.
			c.mu.Lock()
			if ch := c.pending[f.TransID]; ch != nil {
				select {
				case ch <- f:
				default: // a repeated response: the first one counts
				}
			}
			c.mu.Unlock()
			continue
		}
		status := 200
		if f.Method != "K-ALIVE" && f.Method != "REPORT" {
			status = 405
		}
		if err := c.write(&msr.Frame{TransID: f.TransID, Status: status}); err != nil {
			return
		}
	}
}

// keepAlive sends K-ALIVE at a third of the granted interval.
func (c *Conn) keepAlive() {
	defer c.wg.Done()
	t := time.NewTicker(max(c.keep/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		err := c.KeepAlive(ctx)
		cancel()
		if err != nil {
			c.cfg.Log.Info("mscclient: keep-alive failed, channel closed", "msr", c.cfg.Addr, "err", err)
			c.fail(fmt.Errorf("mscclient: keep-alive: %w", err))
			return
		}
	}
}

// token is a random transaction id or Dialog-ID (RFC 6230 trans-id:
// alphanumeric, 4–32 characters).
func token() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
