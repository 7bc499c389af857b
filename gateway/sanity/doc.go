// Package sanity is the request validation RFC 3261 §8.2 puts before any
// processing and before authentication, for what sipgo's parser lets
// through: a scheme the box does not serve, duplicated single headers, a
// CSeq that does not match, extensions the box does not support, bodies
// and Accept values it cannot answer. Check was written against the RFC
// 4475 torture messages (cmd/outpostd/torture_e2e_test.go).
package sanity
