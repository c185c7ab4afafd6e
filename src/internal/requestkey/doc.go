// Package requestkey derives the key under which the sidecar collapses unary
// calls. Two calls share one backend call (and its response) exactly when
// their keys are equal, so the key decides what is safe to share.
//
// The key covers the full method, the codec content-subtype ("" and "proto"
// are the same codec), the request payload and the request headers a Rule
// keeps. The payload is the bytes as they came, or, where the request's
// descriptor is known, the message as a Schema encodes it: equal messages
// in other bytes share a key, and the fields a policy names are left out. Its encoding is injective: every field is length-prefixed,
// header names are lower-cased and sorted, and each header's values keep their
// order. Equal keys therefore mean equal (method, subtype, payload, kept
// headers) tuples and nothing else.
//
// Safety is the point: callers with different credentials must never share a
// response. Credential headers (see Credentials) are always in the key unless
// RuleOptions.ShareAcrossCredentials deliberately says otherwise.
package requestkey
