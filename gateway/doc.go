// Package gateway is the box's SIP side, on sipgo: it owns the SIP
// listeners (one socket per configured address, bound by the gateway so
// that port 0 works and the bound address can be reported), the sipgo user
// agent and server, and routes requests to the parts that handle them: the
// local registrar (gateway/registrar) and OPTIONS keep-alives.
//
// Listeners are reconciled on Reconfigure: an unchanged listener keeps its
// socket, a new one is bound before anything else changes (so a bad
// address fails the push without side effects), a removed one is closed.
//
// It does not import netcfg or the appliance: the appliance translates the
// stored document into Config.
package gateway
