package mscclient

import (
	"context"
	"net/netip"
	"sync"
)

// Pool keeps one open channel per MSR control address.
type Pool struct {
	cfg Config // template: Addr is set per Get

	mu     sync.Mutex
	conns  map[netip.AddrPort]*Conn
	dials  map[netip.AddrPort]*dialing
	closed bool
}

// dialing is a Dial in progress that other Gets wait for.
type dialing struct {
	done chan struct{}
	c    *Conn
	err  error
}

// NewPool returns an empty Pool whose channels use cfg (Addr ignored).
func NewPool(cfg Config) *Pool {
	return &Pool{cfg: cfg, conns: map[netip.AddrPort]*Conn{}, dials: map[netip.AddrPort]*dialing{}}
}

// Get returns the open channel to addr, dialling (and synchronising) it
// when there is none or the previous one failed. Concurrent Gets for one
// address share one Dial.
func (p *Pool) Get(ctx context.Context, addr netip.AddrPort) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if c := p.conns[addr]; c != nil {
		select {
		case <-c.Done():
			delete(p.conns, addr)
		default:
			p.mu.Unlock()
			return c, nil
		}
	}
	if d := p.dials[addr]; d != nil {
		p.mu.Unlock()
		select {
		case <-d.done:
			return d.c, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	d := &dialing{done: make(chan struct{})}
	p.dials[addr] = d
	p.mu.Unlock()

	cfg := p.cfg
	cfg.Addr = addr
	// The Dial is shared: it must not end with the first caller's context.
	d.c, d.err = Dial(context.WithoutCancel(ctx), cfg)
	p.mu.Lock()
	delete(p.dials, addr)
	if d.err == nil {
		if p.closed {
			d.c.Close()
			d.c, d.err = nil, ErrClosed
		} else {
			p.conns[addr] = d.c
		}
	}
	p.mu.Unlock()
	close(d.done)
	return d.c, d.err
}

// Close closes every channel; later Gets fail.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[netip.AddrPort]*Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
