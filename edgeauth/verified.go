package edgeauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// A client sends the same token with every request until it expires; checking its
// signature each time costs tens of µs (ES256 about 75 µs here). The verifier remembers
// the tokens that passed every check, by their sha256, for the key set they passed
// with and no longer than the token is valid or maxVerifiedAge: a refresh that changes
// the keys (a key revoked) checks every token again, and expiry is never extended.

const (
	maxVerified    = 4096
	maxVerifiedAge = 5 * time.Minute
)

type verifiedCache struct {
	mu sync.Mutex
	m  map[[32]byte]verifiedEntry
}

type verifiedEntry struct {
	id    Identity
	keys  *keySet   // the key set the token verified with
	until time.Time // when the entry stops answering: the token's exp (plus skew) or the age bound
}

// get returns the identity token verified to under keys, if it is remembered and
// still valid at now.
func (c *verifiedCache) get(sum [32]byte, keys *keySet, now time.Time) (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[sum]
	if !ok {
		return Identity{}, false
	}
	if e.keys != keys || !now.Before(e.until) {
		delete(c.m, sum)
		return Identity{}, false
	}
	return e.id, true
}

// put remembers a token that passed every check at now under keys.
func (c *verifiedCache) put(sum [32]byte, id Identity, keys *keySet, now, exp time.Time) {
	until := now.Add(maxVerifiedAge)
	if exp.Before(until) {
		until = exp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]verifiedEntry{}
	}
	if len(c.m) >= maxVerified {
		for k, e := range c.m { // drop what has run out, else one entry
			if !now.Before(e.until) || len(c.m) >= maxVerified {
				delete(c.m, k)
			}
			if len(c.m) < maxVerified/2 {
				break
			}
		}
	}
	c.m[sum] = verifiedEntry{id: id, keys: keys, until: until}
}

func tokenSum(token string) [32]byte { return sha256.Sum256([]byte(token)) }
