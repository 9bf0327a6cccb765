//go:build wasip1

// Command warmprobe is a tool guest that tries every way it has to tell an instance that
// served calls before from a fresh one, for the warm-instance tests. Input "probe"
// reports what it sees; "dirty" first changes everything it can — memory, the Go
// runtime's cwd, environment and args, open descriptors left open, a preopen moved, stdin
// closed, a directory half read — then reports; "exit" exits with status 3; "grow" grows
// memory by 32 MiB; "gc" reports the Go runtime's collector settings and how many
// collections a small call and then one churning through four times its memory limit in
// garbage ran (a "gc" report has only those lines); "wait" emits a chunk
// and sleeps an hour (the test cancels it); "hold" emits a chunk and returns.
//
// A report is one key=value per line. The lines named in randomLines draw from the Go
// runtime's random state — math/rand/v2, math/rand, the iteration order of a map built
// by the call and of one built in init — and must differ from call to call, fresh or
// reused, as a fresh process's would; every other line must be the same for every
// instance, fresh or reused.
package main

import (
	crand "crypto/rand"
	"fmt"
	randv1 "math/rand"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

//go:wasmimport wasi_snapshot_preview1 fd_prestat_get
func fdPrestatGet(fd int32, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 fd_fdstat_get
func fdFdstatGet(fd int32, buf unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 fd_renumber
func fdRenumber(from, to int32) uint32

//go:wasmimport wasi_snapshot_preview1 fd_readdir
func fdReaddir(fd int32, buf unsafe.Pointer, n uint32, cookie uint64, used unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 fd_tell
func fdTell(fd int32, off unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
func environSizesGet(count, size unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 args_sizes_get
func argsSizesGet(count, size unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 clock_time_get
func clockTimeGet(id uint32, precision uint64, t unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 clock_res_get
func clockResGet(id uint32, res unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 random_get
func randomGet(buf unsafe.Pointer, n uint32) uint32

var (
	calls    int
	heap     = map[int]string{}
	initMono = monotonic()
	initTime = time.Now()
	mrandAt  = rand.Uint64() // drawn at init, so it is the same in every call of a snapshot
	initMap  = keyed(64)
	initKey  = keyAtInit()
	ballast  []byte
)

// keyAtInit draws a key from crypto/rand in init when DRAW_AT_INIT is set: randomness
// the host cannot refresh in a snapshot.
func keyAtInit() string {
	if os.Getenv("DRAW_AT_INIT") == "" {
		return ""
	}
	var k [16]byte
	crand.Read(k[:])
	return fmt.Sprintf("%x", k)
}

// keyed is a map of n keys, for the order its iteration visits them in.
func keyed(n int) map[int]bool {
	m := make(map[int]bool, n)
	for i := range n {
		m[i] = true
	}
	return m
}

// order is the first 8 keys m's iteration visits.
func order(m map[int]bool) string {
	var keys []string
	for k := range m {
		if keys = append(keys, fmt.Sprint(k)); len(keys) == 8 {
			break
		}
	}
	return strings.Join(keys, ",")
}

func monotonic() uint64 {
	var t uint64
	clockTimeGet(1, 1, unsafe.Pointer(&t))
	return t
}

func report() string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	calls++
	line("calls", calls)
	line("heap", len(heap))
	line("mrand", rand.Uint64())
	line("mrand1", randv1.Int63())
	line("maporder", order(keyed(64)))
	line("maporder-init", order(initMap))
	for fd := int32(0); fd < 24; fd++ {
		var st [24]byte
		errno := fdFdstatGet(fd, unsafe.Pointer(&st[0]))
		var pre [8]byte
		perr := fdPrestatGet(fd, unsafe.Pointer(&pre[0]))
		var off uint64
		terr := fdTell(fd, unsafe.Pointer(&off))
		line(fmt.Sprintf("fd%d", fd), fmt.Sprintf("errno=%d type=%d flags=%d prestat=%d/%d tell=%d/%d", errno, st[0], st[2], perr, pre[4], terr, off))
	}
	var dirent [256]byte
	var used uint32
	derr := fdReaddir(3, unsafe.Pointer(&dirent[0]), uint32(len(dirent)), 0, unsafe.Pointer(&used))
	line("readdir3", fmt.Sprintf("errno=%d used=%d", derr, used))
	f, err := os.Open("/data.txt")
	if err != nil {
		line("open", err)
	} else {
		off, _ := f.Seek(0, 1)
		buf := make([]byte, 3)
		n, _ := f.Read(buf)
		line("open", fmt.Sprintf("fd=%d off=%d read=%q", f.Fd(), off, buf[:n]))
		f.Close()
	}
	wd, _ := os.Getwd()
	line("cwd", wd)
	line("env", strings.Join(os.Environ(), ","))
	line("args", strings.Join(os.Args, ","))
	var ec, es, ac, as uint32
	environSizesGet(unsafe.Pointer(&ec), unsafe.Pointer(&es))
	argsSizesGet(unsafe.Pointer(&ac), unsafe.Pointer(&as))
	line("wasi-env", fmt.Sprintf("%d/%d", ec, es))
	line("wasi-args", fmt.Sprintf("%d/%d", ac, as))
	var r0, r1 uint64
	clockResGet(0, unsafe.Pointer(&r0))
	clockResGet(1, unsafe.Pointer(&r1))
	line("clock-res", fmt.Sprintf("%d/%d", r0, r1))
	// The monotonic clock runs on from the snapshot's reading, never behind it; its
	// reading and the Go runtime's agree on how long ago init was (to the second).
	mono := monotonic()
	line("mono-after-init", mono >= initMono)
	line("since-init-agrees", (time.Duration(mono-initMono)-time.Since(initTime)).Abs() < time.Second)
	var rnd [16]byte
	line("random", fmt.Sprintf("errno=%d nonzero=%t", randomGet(unsafe.Pointer(&rnd[0]), 16), rnd != [16]byte{}))
	line("mrand-init", mrandAt)
	if initKey != "" {
		line("key-init", initKey)
	}
	return b.String()
}

// dirty changes all the state a call can reach.
func dirty() {
	for i := range 100 {
		heap[i] = strings.Repeat("x", i%16) // small: the heap stays within the snapshot's memory
	}
	if f, err := os.Open("/data.txt"); err == nil {
		f.Read(make([]byte, 2)) // left open at offset 2
		fdRenumber(int32(f.Fd()), 12)
	}
	os.Open("/data.txt") // left open
	os.Open("/sub")      // a directory, left open
	var dirent [64]byte
	var used uint32
	fdReaddir(3, unsafe.Pointer(&dirent[0]), uint32(len(dirent)), 0, unsafe.Pointer(&used))
	fdRenumber(3, 20) // the preopen moves
	syscall.Close(0)
	os.Chdir("/sub")
	os.Setenv("DIRTY", "1")
	os.Args = append(os.Args, "dirty")
}

var sink []byte

// gcReport tells how the Go runtime collects in this call: GOGC's percent (-1: off), the
// memory limit, collections during a small allocation and during a churn of garbage four
// times the limit, 1 MiB at a time.
func gcReport() string {
	var st goruntime.MemStats
	collections := func() uint32 { goruntime.ReadMemStats(&st); return st.NumGC }
	pct := debug.SetGCPercent(-1)
	debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(-1)
	n0 := collections()
	sink = make([]byte, 1<<20)
	n1 := collections()
	for range 4 * min(limit, 1<<30) >> 20 {
		sink = make([]byte, 1<<20)
	}
	n2 := collections()
	sink = nil
	return fmt.Sprintf("gcpercent=%d\nmemlimit=%d\nsmall-gcs=%d\nchurn-gcs=%d\n", pct, limit, n1-n0, n2-n1)
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		switch guest.Value(in.Data) {
		case "dirty":
			dirty()
		case "exit":
			os.Exit(3)
		case "grow":
			ballast = make([]byte, 32<<20) // the memory grows past the snapshot's
			ballast[len(ballast)-1] = 1
		case "wait":
			guest.EmitChunk("waiting")
			time.Sleep(time.Hour)
		case "hold":
			guest.EmitChunk("holding")
		case "gc":
			return tool.Result{Status: tool.Passed, Data: guest.Some(gcReport())}
		}
		return tool.Result{Status: tool.Passed, Data: guest.Some(report())}
	})
}

func main() {}
