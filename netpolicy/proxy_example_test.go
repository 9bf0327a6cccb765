package netpolicy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// A session's proxy dials through its pinning resolver; a local server is reached through
// a localhost rule, which the resolver answers itself.
func ExampleNewProxy() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer origin.Close()
	port := origin.URL[strings.LastIndexByte(origin.URL, ':')+1:]

	rules, _ := netpolicy.ParseRules([]string{"https://api.example.com", "http://localhost:" + port})
	res, _ := netpolicy.NewResolver(netpolicy.ResolverConfig{Rules: rules, Upstream: "127.0.0.1:53"})
	p, _ := netpolicy.NewProxy(netpolicy.ProxyConfig{
		Rules:    rules,
		Resolver: res,
		OnDeny:   func(d netpolicy.Denial) { fmt.Println("denied:", d.Source, d.Host, errs.Code(d.Err)) },
	})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(l)
	defer p.Close()

	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()})}}
	for _, u := range []string{"http://localhost:" + port + "/", "http://evil.example.net/"} {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Println(err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		msg, _, _ := strings.Cut(string(body), " (fix:")
		fmt.Println(resp.StatusCode, msg)
	}
	// Output:
	// 200 hello
	// denied: proxy evil.example.net E-NET-016
	// 403 netpolicy: E-NET-016: network policy: evil.example.net:80 not in capabilities.network.allow
}
