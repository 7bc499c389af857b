package relay

// Stats returns both legs' statistics so far (the audio stream's).
func (s *Session) Stats() [2]LegStats {
	var out [2]LegStats
	for l := range 2 {
		out[l] = s.io[l].legStats()
	}
	return out
}

// legStats returns the figures of one stream on one leg.
func (io *legIO) legStats() LegStats {
	io.statsMu.Lock()
	st := io.stats.Stats()
	io.statsMu.Unlock()
	out := LegStats{
		Packets: st.Packets, Bytes: st.Bytes, Expected: st.Expected, Lost: st.Lost, Jitter: st.Jitter,
		Relayed: io.relayed.Load(), RTCP: io.rtcp.Load(), Refused: io.refused.Load(), Dropped: io.dropped.Load(),
		SRTPAuthFailures: io.authErr.Load(), MusicOnHold: io.moh.Load(),
	}
	if c := io.rx.Load(); c != nil {
		out.SRTP = c.suite
	}
	if p := io.pair.Load(); p != nil {
		out.Port = p.port
	}
	return out
}

// Release is Close without the figures, for an interface declared where
// LegStats cannot be named.
func (s *Session) Release() { s.Close() }

// Close stops relaying, waits for the session's readers, releases its
// ports and returns the final statistics. It is safe to call more than
// once and concurrently; every call returns the same figures.
func (s *Session) Close() [2]LegStats {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		pairs, pl := append([]*pair(nil), s.pairs[:]...), s.poller
		for _, st := range s.streams {
			pairs = append(pairs, st.pairs[:]...)
		}
		players := s.players
		s.players = [2]*mohPlayer{}
		s.mu.Unlock()
		for _, p := range players {
			if p != nil {
				p.halt()
			}
		}
		for _, p := range pairs {
			switch {
			case p == nil:
			case p.polled:
				pl.remove(p) // returns once the poller no longer reads them
			default:
				// Closing the sockets ends the readers (net.ErrClosed).
				_ = p.rtp.Close()
				_ = p.rtcp.Close()
			}
		}
		s.wg.Wait()
		s.final = s.Stats()
		streams := s.Streams()
		s.mu.Lock()
		s.finalStreams = streams
		s.mu.Unlock()
		for _, p := range pairs {
			if p != nil {
				s.r.ports.release(p)
			}
		}
		s.r.removeSession(s, s.final, streams)
	})
	return s.final
}
