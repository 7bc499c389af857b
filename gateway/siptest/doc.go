// Package siptest is the SIP test harness of the gateway's packages: the
// set-up that registrar, upstream, b2bua and gateway tests would each
// write again. It gives
//
//   - UA: a sipgo user agent and server serving loopback UDP and TCP
//     sockets on port 0 until the test ends, ready for requests pinned to
//     them (Laddr) when Listen returns, quiet while it closes; Do sends a
//     request and waits (bounded) for its final response;
//   - Peer: a plain UDP socket that sends wire text and reads answers,
//     for tests of what goes over the wire byte for byte;
//   - Parse, Wire and RoundTrip: messages written as wire text, and a
//     message's trip through the wire (what is built must parse);
//   - Answer: the answer to a 401/407 with sipauth, the product's digest
//     client (independent of gateway/digest, the server side);
//   - CA: certificates for TLS tests (an HQ server's, a client's);
//   - Clock: a clock the test moves, for parts that take one;
//   - Recv and Until: bounded waits for a channel or a condition, never a
//     sleep standing in for an event.
//
// Every wait is bounded by Wait. Only _test.go files import the package
// (cmd/outpostd's dependency test enforces it): it imports testing.
package siptest
