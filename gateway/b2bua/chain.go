package b2bua

// ChainAnchor returns an Anchor whose media crosses two anchors in turn:
// leg A's side of near, near's leg B side facing far's leg A side, and
// far's leg B side facing leg B. So each leg's media is anchored where
// that leg's nearest media resource is (two MSRs, or an MSR and the
// box's own relay) and the two are bridged to each other: every offer and
// answer passes through both, in the direction it travels. Either may
// fall back on its own (an MSR that fails becomes the local relay) and
// the chain still joins the legs.
func ChainAnchor(near, far Anchor) Anchor { return &chainAnchor{near: near, far: far} }

type chainAnchor struct{ near, far Anchor }

// hops is the anchors a body from leg from crosses, in order.
func (c *chainAnchor) hops(from Leg) [2]Anchor {
	if from == LegA {
		return [2]Anchor{c.near, c.far}
	}
	return [2]Anchor{c.far, c.near}
}

func (c *chainAnchor) Offer(from Leg, sdp []byte) ([]byte, error) {
	h := c.hops(from)
	mid, err := h[0].Offer(from, sdp)
	if err != nil {
		return nil, err
	}
	out, err := h[1].Offer(from, mid)
	if err != nil {
		h[0].Reject(from)
		return nil, err
	}
	return out, nil
}

func (c *chainAnchor) Answer(from Leg, sdp []byte) ([]byte, error) {
	h := c.hops(from)
	mid, err := h[0].Answer(from, sdp)
	if err != nil {
		return nil, err
	}
	return h[1].Answer(from, mid)
}

func (c *chainAnchor) Reject(from Leg) {
	c.near.Reject(from)
	c.far.Reject(from)
}

func (c *chainAnchor) Close() {
	c.near.Close()
	c.far.Close()
}

// SetRoute passes the call's route to the anchors that take it (the
// relay's per-route media policy).
func (c *chainAnchor) SetRoute(route string) {
	for _, a := range []Anchor{c.near, c.far} {
		if rs, ok := a.(interface{ SetRoute(route string) }); ok {
			rs.SetRoute(route)
		}
	}
}
