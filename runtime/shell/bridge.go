package shell

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// bridge accepts on a Unix socket the sealed sandbox's forwarders reach and pipes each
// connection to a TCP address on host loopback: a pathname Unix socket is the one door
// between the sandbox's network namespace and the host's.
type bridge struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// startBridges listens on proxy.sock and dns.sock in the sandbox's private folder.
func (s *Sandbox) startBridges() error {
	for _, b := range []struct{ name, target string }{{"proxy.sock", s.cfg.ProxyAddr}, {"dns.sock", s.cfg.DNSAddr}} {
		if b.target == "" {
			continue
		}
		br, err := s.listenBridge(b.name, b.target)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.bridges = append(s.bridges, br)
		s.mu.Unlock()
	}
	return nil
}

// reachSocket names the socket a reachable host port is bridged through.
func reachSocket(port int) string { return fmt.Sprintf("reach-%d.sock", port) }

// listenBridge serves a bridge from name, a socket in the sandbox's private folder, to
// target; the caller closes it. A socket of that name left by an earlier command (a
// run's reach sockets stay until the session closes, and a later run may get the same
// port) is replaced: only one command at a time can hold that port.
func (s *Sandbox) listenBridge(name, target string) (*bridge, error) {
	os.Remove(filepath.Join(s.private, name))
	path := filepath.Join(s.private, name)
	if len(path) > 100 {
		// sun_path holds 108 bytes; the folder's fd names it in fewer.
		dir, err := os.Open(s.private)
		if err != nil {
			return nil, errs.Wrap(err, CodeBridge, part, "cannot open the sandbox's folder "+s.private, "check the records folder")
		}
		defer dir.Close() // the socket stays; only the name used to create it goes
		path = fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, errs.Wrap(err, CodeBridge, part, "cannot listen on "+filepath.Join(s.private, name), "check that the records folder is writable and on a local filesystem")
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false) // Close removes the whole folder
	}
	br := &bridge{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	br.wg.Add(1)
	go br.serve()
	return br, nil
}

func (b *bridge) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.track(c, true) {
			c.Close()
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer b.track(c, false)
			d := net.Dialer{Timeout: 10 * time.Second}
			up, err := d.Dial("tcp", b.target)
			if err != nil {
				c.Close()
				return
			}
			if !b.track(up, true) {
				up.Close()
				c.Close()
				return
			}
			defer b.track(up, false)
			pipe(c, up)
		}()
	}
}

// track adds or removes a live connection; it refuses additions once closed.
func (b *bridge) track(c net.Conn, add bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !add {
		delete(b.conns, c)
		return true
	}
	if b.conns == nil {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *bridge) close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}

// pipe copies both ways, passing each half-close on, and closes both when done.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, b)
	closeWrite(a)
	<-done
	a.Close()
	b.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}
