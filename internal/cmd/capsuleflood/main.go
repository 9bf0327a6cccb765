// Command capsuleflood measures one gateway hosting many capsules: the figures of
// docs/benchmarks.md "Many capsules on one gateway". It builds bin/caddy (or takes
// -caddy), publishes the wordcount example artifact into a temporary registry, writes N
// copies of the wordcount script capsule (each its own name and lock) and a Caddyfile
// mounting each at /c<i>/, then starts the gateway twice on one compilation cache (cold,
// then warm) and prints, for each start: the time until it listens, until the first
// A2A message/send is answered, until every request of a burst is answered, and VmRSS
// per capsule (after the first answer and after a forced GC).
//
//	go run ./internal/cmd/capsuleflood -n 1000
//	go run ./internal/cmd/capsuleflood -n 40 -burst 40
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

func main() {
	n := flag.Int("n", 1000, "capsules on the gateway")
	burst := flag.Int("burst", 1, "capsules sent one message/send each at start, side by side (at most n)")
	caddyBin := flag.String("caddy", "", "the gateway binary (default: build ./cmd/caddy, and the sandbox helper beside it, into the work folder)")
	keep := flag.String("dir", "", "work folder, kept afterwards (default: a temporary one, removed)")
	starts := flag.Int("starts", 2, "gateway starts on one compilation cache (the first is cold)")
	heap := flag.String("heap", "", "write the heap profile of the last start here (after the forced GC)")
	cpuOut := flag.String("cpuprofile", "", "write a CPU profile of the last start's first -cpuseconds here (from when its admin endpoint answers)")
	cpuSecs := flag.Int("cpuseconds", 5, "how long -cpuprofile samples")
	copyModules := flag.Bool("copy", false, "write a copy of the capsule module into every capsule folder (default: hard links to one file)")
	flag.Parse()
	if *burst < 1 || *burst > *n {
		fail(fmt.Errorf("-burst must be between 1 and -n"))
	}
	if err := run(*n, *burst, *starts, *caddyBin, *keep, *heap, profile{*cpuOut, *cpuSecs}, *copyModules); err != nil {
		fail(err)
	}
}

// profile is -cpuprofile and -cpuseconds: where the last start's CPU profile goes ("":
// none) and how long it samples.
type profile struct {
	out     string
	seconds int
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "capsuleflood:", err)
	os.Exit(1)
}

func run(n, burst, starts int, bin, dir, heapOut string, cpu profile, copyModules bool) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "capsuleflood-"); err != nil {
			return fmt.Errorf("work folder: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	if bin == "" {
		// The gateway with its sandbox helper beside it, as installed.
		bin = filepath.Join(dir, "caddy")
		if err := sh(root, nil, "go", "build", "-o", bin, "./cmd/caddy"); err != nil {
			return err
		}
		if err := sh(root, nil, "go", "build", "-o", filepath.Join(dir, "capsulegate-sandbox"), "./cmd/capsulegate-sandbox"); err != nil {
			return err
		}
	}
	home := filepath.Join(dir, "home")
	reg := filepath.Join(dir, "registry")
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	ctx := context.Background()
	toolWasm, err := guestbuild.Build(ctx, filepath.Join(root, "examples/guests/wordcount"))
	if err != nil {
		return fmt.Errorf("build the wordcount tool: %w", err)
	}
	capsuleWasm, err := guestbuild.Build(ctx, filepath.Join(root, "examples/guests/wordcount-capsule"))
	if err != nil {
		return fmt.Errorf("build the wordcount capsule: %w", err)
	}
	// Publish the tool artifact: the example folder plus its module.
	art := filepath.Join(dir, "artifact", "wordcount")
	if err := copyFile(filepath.Join(root, "examples/artifacts/wordcount/murmur.yaml"), filepath.Join(art, "murmur.yaml")); err != nil {
		return err
	}
	if err := copyFile(toolWasm, filepath.Join(art, "wordcount.wasm")); err != nil {
		return err
	}
	zip := filepath.Join(dir, "artifact", "wordcount.mur.zip")
	if err := sh(dir, env, bin, "capsule", "pack", art, "--output", zip); err != nil {
		return err
	}
	if err := sh(dir, env, bin, "capsule", "publish", zip, "--registry", reg); err != nil {
		return err
	}
	// The capsules: c0 is installed (its lock written) by the binary; the rest copy its
	// lock as it is: a lock pins artifacts and never names its capsule, so every copy
	// pins the same wordcount archive, hash for hash.
	man, err := os.ReadFile(filepath.Join(root, "examples/capsules/wordcount/murmur.yaml"))
	if err != nil {
		return fmt.Errorf("read the example capsule: %w", err)
	}
	module, err := os.ReadFile(capsuleWasm)
	if err != nil {
		return fmt.Errorf("read the capsule module: %w", err)
	}
	shared := filepath.Join(dir, "capsule.wasm") // the file every capsule folder links to
	os.Remove(shared)
	if err := os.WriteFile(shared, module, 0o644); err != nil {
		return fmt.Errorf("write the module: %w", err)
	}
	caps := filepath.Join(dir, "capsules")
	var lock []byte
	var routes strings.Builder
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		cdir := filepath.Join(caps, name)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return fmt.Errorf("capsule folder: %w", err)
		}
		m := bytes.Replace(man, []byte("\nname: wordcount\n"), []byte("\nname: "+name+"\n"), 1)
		if err := os.WriteFile(filepath.Join(cdir, "murmur.yaml"), m, 0o644); err != nil {
			return fmt.Errorf("write the manifest: %w", err)
		}
		// Every capsule's module is one file linked into each folder (10,000 copies of
		// 2.8 MB would be 28 GB of disk); -copy writes a copy into each.
		if err := placeModule(shared, filepath.Join(cdir, "capsule.wasm"), module, copyModules); err != nil {
			return err
		}
		if i == 0 {
			if err := sh(dir, env, bin, "capsule", "install", filepath.Join(cdir, "murmur.yaml"), "--registry", reg); err != nil {
				return err
			}
			if lock, err = os.ReadFile(filepath.Join(cdir, "murmur.lock")); err != nil {
				return fmt.Errorf("read the lock: %w", err)
			}
		} else if err := os.WriteFile(filepath.Join(cdir, "murmur.lock"), lock, 0o644); err != nil {
			return fmt.Errorf("write the lock: %w", err)
		}
		fmt.Fprintf(&routes, "\thandle /%s/* {\n\t\tcapsule capsules/%s/murmur.yaml\n\t}\n", name, name)
	}
	fmt.Printf("capsuleflood: %d capsules, burst %d, modules copied %v, binary %s\n", n, burst, copyModules, bin)
	// The load the figures are measured under (docs/benchmarks.md: every figure names it).
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average before the first start: %s\n", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	_, statErr := os.Stat(filepath.Join(dir, "cache"))
	for s := range starts {
		label := "warm"
		if s == 0 && statErr != nil {
			label = "cold"
		}
		last := s == starts-1
		cpuSecs := 0
		if cpu.out != "" && last {
			cpuSecs = cpu.seconds
		}
		r, err := start(dir, bin, env, routes.String(), s, n, burst, heapOut != "" && last, cpuSecs)
		if err != nil {
			return fmt.Errorf("start %d (%s cache): %w", s+1, label, err)
		}
		fmt.Printf("start %d (%s cache): listening %.3fs, first answer %.3fs, all %d answered %.3fs (CPU %.2fs), RSS %.1f MiB (%.3f MiB/capsule), after GC %.1f MiB (%.3f MiB/capsule), heap in use %.1f MiB, goroutines %d\n",
			s+1, label, r.listening.Seconds(), r.first.Seconds(), burst, r.all.Seconds(), r.cpu.Seconds(),
			mib(r.rss), mib(r.rss)/float64(n), mib(r.rssGC), mib(r.rssGC)/float64(n), mib(r.heapInuse), r.goroutines)
		if r.heap != nil {
			if err := os.WriteFile(heapOut, r.heap, 0o644); err != nil {
				return fmt.Errorf("write the heap profile: %w", err)
			}
		}
		if r.cpuProfile != nil {
			if err := os.WriteFile(cpu.out, r.cpuProfile, 0o644); err != nil {
				return fmt.Errorf("write the CPU profile: %w", err)
			}
		}
	}
	return nil
}

// result is what one gateway start measured.
type result struct {
	listening, first, all time.Duration
	cpu                   time.Duration // the gateway's CPU time (user + system) at the last answer
	rss, rssGC, heapInuse int64
	goroutines            int
	heap, cpuProfile      []byte
}

// start runs the gateway on a fresh state and work folder (the registry and the
// compilation cache are shared across starts) and measures it, with a CPU profile of
// its first cpuSecs seconds when cpuSecs is not 0.
func start(dir, bin string, env []string, routes string, s, n, burst int, wantHeap bool, cpuSecs int) (*result, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	run := filepath.Join(dir, fmt.Sprintf("run%d", s))
	cf := fmt.Sprintf(`{
	admin 127.0.0.1:%s
	capsule {
		registry %s
		state_dir %s
		work_root %s
		cache_dir %s
	}
}

http://127.0.0.1:%s {
%s}
`, admin, filepath.Join(dir, "registry"), filepath.Join(run, "state"), filepath.Join(run, "work"), filepath.Join(dir, "cache"), port, routes)
	caddyfile := filepath.Join(dir, fmt.Sprintf("Caddyfile.%d", s))
	if err := os.WriteFile(caddyfile, []byte(cf), 0o644); err != nil {
		return nil, fmt.Errorf("write the Caddyfile: %w", err)
	}
	logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("caddy.%d.log", s)))
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	defer logs.Close()
	cmd := exec.Command(bin, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logs, logs
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: burst}}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the gateway: %w", err)
	}
	// exited is closed when the gateway exits, so that every waiter learns it (a value
	// sent once would reach one of them, leaving the others polling until the deadline);
	// exitErr says how it exited, with the end of its log.
	exited := make(chan struct{})
	var exitErr error
	go func() {
		err := cmd.Wait()
		exitErr = fmt.Errorf("the gateway exited (%v): %s", err, logTail(logs.Name(), 2048))
		close(exited)
	}()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	}()
	r := &result{}
	base := "http://127.0.0.1:" + admin
	cpuDone := make(chan error, 1)
	if cpuSecs > 0 {
		// The admin endpoint answers once the config is read, before the capsules are
		// provisioned: the profile covers their start.
		go func() {
			for time.Now().Before(t0.Add(time.Minute)) {
				if _, err := get(hc, base+"/config/"); err == nil {
					break
				}
				select {
				case <-exited:
					cpuDone <- exitErr
					return
				case <-time.After(time.Millisecond): // polling the admin endpoint until it answers
				}
			}
			var err error
			r.cpuProfile, err = get(hc, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, cpuSecs))
			cpuDone <- err
		}()
	} else {
		cpuDone <- nil
	}
	// The burst: one message/send to each of the first burst capsules, sent from the
	// start; each retries a refused connection until the gateway listens.
	deadline := t0.Add(10 * time.Minute)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	listening := make(chan time.Duration, 1)
	go func() {
		for time.Now().Before(deadline) {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
			if err == nil {
				c.Close()
				listening <- time.Since(t0)
				return
			}
			select {
			case <-exited:
				listening <- 0
				return
			case <-time.After(2 * time.Millisecond): // polling a port until it listens
			}
		}
		listening <- 0
	}()
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := send(hc, fmt.Sprintf("http://127.0.0.1:%s/c%d/", port, i), deadline, exited, &exitErr)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("c%d: %w", i, err)
				}
				return
			}
			if r.first == 0 || took < r.first {
				r.first = took
			}
			r.all = max(r.all, took)
		}()
	}
	wg.Wait()
	r.listening = <-listening
	if firstErr != nil {
		return nil, firstErr
	}
	if err := <-cpuDone; err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	if r.cpu, err = cpuTime(cmd.Process.Pid); err != nil {
		return nil, err
	}
	if r.rss, err = vmRSS(cmd.Process.Pid); err != nil {
		return nil, err
	}
	// A forced GC (the heap profile's gc=1), then the figures again.
	heap, err := get(hc, base+"/debug/pprof/heap?gc=1")
	if err != nil {
		return nil, err
	}
	if wantHeap {
		r.heap = heap
	}
	if r.rssGC, err = vmRSS(cmd.Process.Pid); err != nil {
		return nil, err
	}
	stats, err := get(hc, base+"/debug/pprof/heap?debug=1")
	if err != nil {
		return nil, err
	}
	r.heapInuse = memStat(stats, "HeapInuse")
	gr, err := get(hc, base+"/debug/pprof/goroutine?debug=1")
	if err != nil {
		return nil, err
	}
	if f := strings.Fields(string(gr)); len(f) > 3 {
		r.goroutines, _ = strconv.Atoi(f[3]) // "goroutine profile: total N"
	}
	return r, nil
}

// send sends one message/send until the gateway answers it (a refused connection means
// it is not listening yet) and checks the task completed.
func send(hc *http.Client, url string, deadline time.Time, exited <-chan struct{}, exitErr *error) error {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"one two three"}]}}}`)
	for {
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
				return err
			}
			select {
			case <-exited:
				return *exitErr // written before exited was closed
			case <-time.After(2 * time.Millisecond): // polling until the port listens
			}
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("read the answer: %w", err)
		}
		var out struct {
			Result struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"result"`
		}
		if err := json.Unmarshal(data, &out); err != nil || out.Result.Status.State != "completed" {
			return fmt.Errorf("HTTP %d, not a completed task: %.300s", resp.StatusCode, data)
		}
		return nil
	}
}

// logTail is the last n bytes of the gateway's log file: its own account of why it
// stopped.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(b[max(0, len(b)-n):]))
}

func get(hc *http.Client, url string) ([]byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin %s: HTTP %d: %w", url, resp.StatusCode, err)
	}
	return data, nil
}

// memStat reads one runtime.MemStats line ("# HeapInuse = 123") of a debug=1 heap profile.
func memStat(profile []byte, name string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# "+name+" = "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// vmRSS is the process's resident set in bytes, from /proc/<pid>/status.
func vmRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read VmRSS: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// cpuTime is the user and system CPU time the process has used, from /proc/<pid>/stat
// (in clock ticks of 1/100 s, as on every Linux Go supports): a figure the machine's
// other work disturbs less than elapsed time.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time: %w", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("read the CPU time: %d fields in /proc/%d/stat", len(f), pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("read the CPU time: %w", err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// sh runs a command in dir, its output shown only when it fails.
func sh(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// placeModule links src at dst, or writes data there when asked to copy or when the
// link fails (another file system).
func placeModule(src, dst string, data []byte, copyModules bool) error {
	os.Remove(dst) // a folder kept from an earlier run (-dir): never write through its link
	if !copyModules && os.Link(src, dst) == nil {
		return nil
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("write the module: %w", err)
	}
	return nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	return nil
}

// repoRoot is the module root above the working folder.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working folder: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working folder: run from the repository")
		}
		dir = parent
	}
}
