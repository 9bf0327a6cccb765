// Package ports picks loopback ports for servers tests start and start again.
package ports

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
)

// Free returns a loopback port free now, below the kernel's ephemeral range: a server a
// test stops and starts again (a gateway after kill -9 or a reload, a database after an
// outage) must find it free, and a port in that range could meanwhile be handed to any
// client's connection — even one to that very port, a TCP self-connect holding it.
func Free() (int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	var b [8]byte
	for range 200 {
		_, _ = rand.Read(b[:])
		port := 10000 + int(binary.LittleEndian.Uint64(b[:])%uint64(low-10000))
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port below the ephemeral range")
}
