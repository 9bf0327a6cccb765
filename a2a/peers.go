package a2a

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/capsulegate/capsulegate/internal/artname"
)

// The headers a sending capsule runtime puts on a peer message (docs/reference/a2a.md
// "Peer tasks"). The runtime sets them, never a guest: no guest-facing interface has a
// field for them. The first two are upstream Murmur's.
const (
	HeaderTaskOrigin    = "X-Murmur-Task-Origin"     // "peer"
	HeaderTaskTrust     = "X-Murmur-Task-Trust"      // "trusted"
	HeaderPeerCapsule   = "X-Capsule-Peer-Capsule"   // the sending capsule's name
	HeaderPeerPrincipal = "X-Capsule-Peer-Principal" // the principal its task runs for, query-escaped
	HeaderPeerChain     = "X-Capsule-Peer-Chain"     // the chain's task ids, first first, comma-separated
)

// Bounds of what a peer message's headers may claim.
const (
	maxChain        = 64
	maxChainEntry   = 128
	peerRefusalBody = `{"error":"peer_not_accepted","message":"this capsule does not accept tasks from peers"}`
)

// PeerOrigin is where a peer task comes from: the capsule and task that sent it, the
// principal that task runs for, and the chain of task ids that led to it, first first
// (the sending task last).
type PeerOrigin struct {
	Capsule, TaskID, Principal string
	Chain                      []string
}

// peerOf reads the peer claim of r: a message a capsule runtime sent on behalf of one of
// its tasks. ok is false when r makes no such claim (any spelling of "peer" in the origin
// header makes one).
func peerOf(r *http.Request) (PeerOrigin, bool) {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get(HeaderTaskOrigin)), "peer") {
		return PeerOrigin{}, false
	}
	p := PeerOrigin{Capsule: r.Header.Get(HeaderPeerCapsule)}
	if !artname.Valid(p.Capsule) {
		p.Capsule = "unnamed"
	}
	if who, err := url.QueryUnescape(r.Header.Get(HeaderPeerPrincipal)); err == nil {
		p.Principal = principalName(who)
	}
	for _, id := range strings.Split(r.Header.Get(HeaderPeerChain), ",") {
		id = strings.TrimSpace(id)
		if id == "" || len(id) > maxChainEntry || len(p.Chain) == maxChain {
			continue
		}
		p.Chain = append(p.Chain, id)
	}
	if n := len(p.Chain); n > 0 {
		p.TaskID = p.Chain[n-1]
	}
	return p, true
}

// peerPrincipal is the principal a peer task is owned by: derived from the calling
// capsule and the principal its task runs for, below the principal that authenticated
// the request (the credential the operator gave the sending gateway). Its tasks are
// therefore neither the authenticated principal's own nor the end principal's.
func peerPrincipal(authenticated string, p PeerOrigin) string {
	name := "capsule:" + p.Capsule
	if p.Principal != "" {
		name += "/for:" + p.Principal
	}
	if authenticated != "" {
		name = authenticated + "/" + name
	}
	return principalName(name)
}

// asPeer makes who the caller a peer claim in r derives; it reports whether r claims one.
func asPeer(r *http.Request, who caller) (caller, bool) {
	p, ok := peerOf(r)
	if !ok {
		return who, false
	}
	who.principal, who.peer = peerPrincipal(who.principal, p), &p
	return who, true
}

// refusePeer answers a peer message to a capsule that does not accept peer tasks: one
// fixed 403, the same for every operation, asking for no credential.
func refusePeer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(peerRefusalBody))
}

// PeerRefused reports whether an answer is the refusal of a peer message (a 403 whose
// body is refusePeer's): the sending runtime tells its guest the peer does not consent.
func PeerRefused(status int, body []byte) bool {
	return status == http.StatusForbidden && strings.Contains(string(body), `"peer_not_accepted"`)
}
