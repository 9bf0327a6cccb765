package netpolicy

import (
	"net"
	"sync/atomic"
)

// Traffic counts the bytes of the connections a Dialer made: what was written to the
// remote end (Sent) and read from it (Received), TLS records included, so one figure
// covers guests' HTTP, drivers' provider calls and the proxy's forwarding alike. Safe
// for concurrent use; the zero value is ready.
type Traffic struct {
	sent, received atomic.Int64
}

// Sent is the number of bytes written to the remote ends so far.
func (t *Traffic) Sent() int64 { return t.sent.Load() }

// Received is the number of bytes read from the remote ends so far.
func (t *Traffic) Received() int64 { return t.received.Load() }

// counted wraps c so that what passes through it is added to t.
func (t *Traffic) counted(c net.Conn) net.Conn {
	if t == nil {
		return c
	}
	return &countedConn{Conn: c, t: t}
}

// countedConn is a connection whose bytes a Traffic counts.
type countedConn struct {
	net.Conn
	t *Traffic
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.received.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.t.sent.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the connection when the one beneath can: the proxy's tunnels
// pass an end of input on that way.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
