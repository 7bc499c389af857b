// Package gateway is the box's SIP side, on sipgo: it owns the sipgo user
// agent and server, serves the SIP listeners, and routes requests to the
// parts that handle them. One file per concept at the root:
//
//	server.go       Config, New, Run, Close; REGISTER, OPTIONS and 405
//	                answers (481 to a stray CANCEL or a PRACK), each after
//	                the checks of gateway/sanity; the mode new calls are
//	                routed in (SetMode); the loggers of sipgo, the fast
//	                path and the registrar, each a siplog.Limiter, and
//	                their drop counters; how long finished transactions
//	                are kept (retainFinished)
//	running.go      what one push runs (config, dial plan, HQ trunk, PSTN
//	                health, pool, listener addresses, certificate, B2BUA
//	                settings): one immutable value stored per commit; a
//	                request loads it once and works under it to its end
//	                (a UDP INVITE under the one its admission saw); the
//	                router each call is set up with (b2bua.Policy)
//	reconfigure.go  Prepare/Commit/Abort: a push checked whole, then applied
//	invite.go       admission and routing of new calls (UDP INVITEs are
//	                admitted on the fast path, before sipgo keeps any
//	                state: admitInvite, which gateway/overload may
//	                shed); the locator the B2BUA asks
//	calls.go        the calls in progress, drain, remote media anchors
//	trust.go        PSTN gateways and HQ trusted by source address (UDP:
//	                exact ip:port; TCP and TLS: IP; same transport; HQ
//	                networks)
//	localaddr.go    where requests the box sends leave from (LocalChooser)
//	trunks.go       the HQ trunk's verdicts for the mode logic
//	                (OnHQTarget) and its health; the PSTN gateways'
//	                health: blocks by the retry rule from call outcomes,
//	                optional OPTIONS probes (PSTNProbeInterval), status
//	warning.go      the survivable-mode Warning (RFC 3261 §20.43) on the
//	                box's final answers to REGISTER and INVITE: added by
//	                respond, by the fast path's REGISTER answers and
//	                stateless INVITE refusals, and by the B2BUA
//	                (b2bua.Config.Warning); SetMode empties the fast
//	                path's answer cache when the mode changes
//	upstream.go     upstream registration of local users at HQ
//	pool.go         the registrar pool: members' OPTIONS probes, the
//	                registrar's 301 hook, calls to members (signed) and
//	                from them (trusted by address and signature), status
//	route.go        explanations of routing decisions (outpostctl route)
//	capture.go      the listeners' trace tap (outpostctl trace) and the
//	                HEPv3 exporter to a Homer server, prepared and committed
//	                with the rest of a push
//
// and sub-packages that know nothing of the Server:
//
//	listen/     listening sockets: specs, binding, UDP buffers, TCP
//	            limits (per source, IPv6 per /64; a deadline per message),
//	            reconciliation across pushes, sipgo readiness
//	fastpath/   stateless UDP REGISTER/OPTIONS with a retransmission cache
//	            (ForgetAnswers empties it);
//	            stateless, rate-limited refusal of unauthenticated INVITEs
//	sanity/     request checks before any handler (RFC 3261 §8.2, RFC 4475)
//	siplog/     per-packet log records counted, one line per kind and
//	            source class per 10 s, values cut and escaped
//	trace/      SIP traces: the tap the listening sockets' wrappers feed,
//	            filters, pcap files, HEPv3 export
//	facing/     which local address faces a peer (pure, table-tested)
//	registrar/  the local registrar (RFC 3261 §10.3)
//	digest/     digest authentication, server side
//	dialplan/   routing decisions by number and mode
//	b2bua/      the back-to-back user agent that carries calls
//	overload/   when new calls are shed (CoDel on the setups' queueing
//	            delay and the sockets' sojourn, and the live heap)
//	hqtrunk/    the HQ trunk: primary and backup pools, their targets,
//	            health and OPTIONS probes, TLS to HQ (verified by HQ's
//	            name, dialled by the box itself), the candidates of
//	            upstream registration
//	resolve/    RFC 3263 location of the HQ servers
//	health/     target health and the failover rule
//	upstream/   the upstream registration agent
//	pool/       the registrar pool's decisions (home, failback, peers,
//	            HMAC signatures between members)
//	rendezvous/ rendezvous (HRW) hashing: a user's order over registrars
//
// Listeners are reconciled on Reconfigure: an unchanged listener keeps its
// socket, a new one is bound before anything else changes (so a bad
// address fails the push without side effects), a removed one is closed.
//
// It does not import netcfg or the appliance: the appliance translates the
// stored document into Config.
package gateway
