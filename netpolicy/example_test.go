package netpolicy_test

import (
	"fmt"
	"net/netip"

	"github.com/capsulegate/capsulegate/netpolicy"
)

func ExampleParseRules() {
	rs, err := netpolicy.ParseRules([]string{
		"https://API.Example.com/",
		"*.cdn.example.net",
		"localhost:3000",
		"0x7f.1:8080",
		"https://[::ffff:10.0.0.5]",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rs {
		fmt.Println(r)
	}
	// Output:
	// https://api.example.com
	// *.cdn.example.net
	// localhost:3000
	// 127.0.0.1:8080
	// https://10.0.0.5
}

func ExampleParseRules_errors() {
	_, err := netpolicy.ParseRules([]string{"https://example.com/v1", "*"})
	fmt.Println(err)
	// Output:
	// netpolicy: E-NET-005: [0]: network rule "https://example.com/v1": path "/v1" is not allowed; rules name hosts, not URLs (fix: remove the path; a rule allows the whole host)
	// netpolicy: E-NET-015: [1]: network rule "*": "*" would allow every host (fix: list the hosts the capsule needs, or a wildcard under a domain you trust, e.g. *.example.com)
}

func ExampleRules_Check() {
	rs, _ := netpolicy.ParseRules([]string{"https://api.example.com", "localhost:3000"})

	r, err := rs.Check("https", "API.example.com", 443, []netip.Addr{netip.MustParseAddr("93.184.216.34")})
	fmt.Println(r, err)

	_, err = rs.Check("https", "api.example.com", 443, []netip.Addr{netip.MustParseAddr("169.254.169.254")})
	fmt.Println(err)

	_, err = rs.Check("", "evil.example.com", 443, nil)
	fmt.Println(err)

	r, err = rs.Check("http", "localhost", 3000, []netip.Addr{netip.MustParseAddr("::1")})
	fmt.Println(r, err)
	// Output:
	// https://api.example.com <nil>
	// netpolicy: E-NET-017: network policy: api.example.com:443 resolves to 169.254.169.254, a metadata address, which rule "https://api.example.com" does not permit (fix: point the name at a public address, or allow the address itself as an IP rule and connect to it by address; a localhost rule reaches loopback only)
	// netpolicy: E-NET-016: network policy: evil.example.com:443 not in capabilities.network.allow (fix: if the capsule should reach it, add "evil.example.com:443" to capabilities.network.allow)
	// localhost:3000 <nil>
}

func ExampleRestricted() {
	for _, s := range []string{"10.1.2.3", "::ffff:127.0.0.1", "fd00:ec2::254", "100.64.0.1", "8.8.8.8"} {
		reason, restricted := netpolicy.Restricted(netip.MustParseAddr(s))
		fmt.Println(s, restricted, reason)
	}
	// Output:
	// 10.1.2.3 true private
	// ::ffff:127.0.0.1 true loopback
	// fd00:ec2::254 true metadata
	// 100.64.0.1 true cgnat
	// 8.8.8.8 false
}
