package escape

// TestEscapeSuite is the escape suite: one table (rows) of attacks on every surface, each
// run against the real code through its exported API. A row passes only when the attack
// was blocked — a sentinel it aimed at (a file outside, a listener, an upstream DNS
// server, a host variable) saw nothing — and it was classified as the row expects (a
// stable error code, a guest failure reason, a guest-visible errno, an HTTP or DNS
// status, an exit status). docs/escapes.md lists the surfaces and what a new row must
// assert.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// row is one attack.
type row struct {
	id      string  // stable name, unique in the table: <surface prefix>-<n>
	surface Surface // the way in
	attack  string  // the attack in words
	want    string  // the expected classification
	need    string  // "" or a requirement checked before the row runs (needSealed)
	// check marks a row that holds a parser to a rule (a manifest a capsule could write),
	// not an attack on a running capsule: the page counts the two apart.
	check bool
	run   func(t *testing.T, s *suite) outcome
}

// outcome is what an attack got.
type outcome struct {
	class   string // how it was refused, compared with row.want
	escaped string // what got out, "" when nothing did; any other value fails the row
}

// blocked is the outcome of an attack refused as class with nothing out.
func blocked(class string) outcome { return outcome{class: class} }

// Requirements a row may need from the host.
const (
	needSealed  = "sealed"         // the OS sandbox's sealed tier (namespaces, Landlock, seccomp)
	needHarness = "sealed+cgroups" // the sealed tier, and cgroup limits this host can apply
)

// table is the suite, in surface order.
func table() []row {
	var rows []row
	for _, part := range [][]row{wasmCoreRows(), wasmComponentRows(), wasi2HandleRows(), w2ComponentRows(), shellRows(), nativeRows(),
		networkRows(), dnsRows(), archiveRows(), registryRows(), registryClientRows(), a2aRows(), gatewayRows(), partsRows(), peerRows(), jwtRows(), harnessRows(), mcpBridgeRows()} {
		rows = append(rows, part...)
	}
	return rows
}

// minRows is the acceptance floor of issue 17: at least this many cases.
const minRows = 100

func TestEscapeSuite(t *testing.T) {
	rows := table()
	checkTable(t, rows)
	s := newSuite(t)
	s.bridges(t) // now: its slow clients' clock runs while the other rows do
	ran, skipped := map[Surface]int{}, map[Surface][]string{}
	for _, r := range rows {
		var didRun, wasSkipped bool
		t.Run(r.id, func(t *testing.T) {
			didRun = true                               // false when -run filtered the row out
			defer func() { wasSkipped = t.Skipped() }() // also when Skip ends the row early
			if why := s.lacks(r.need); why != "" {
				unavailable(t, inCI(), r, why)
				return
			}
			o := r.run(t, s)
			if o.escaped != "" {
				t.Errorf("ESCAPE %s (%s): %s", r.id, r.attack, o.escaped)
			}
			if o.class != r.want {
				t.Errorf("%s (%s): classified %q, want %q", r.id, r.attack, o.class, r.want)
			}
		})
		switch {
		case !didRun:
		case wasSkipped:
			skipped[r.surface] = append(skipped[r.surface], r.id)
		default:
			ran[r.surface]++
		}
	}
	t.Log(summary(len(rows), ran, skipped))
}

// inCI reports whether the suite runs in CI (CI=true), where no row may pass by not
// running.
func inCI() bool { return os.Getenv("CI") == "true" }

// unavailable ends a row this host cannot run. In CI it fails, naming what the host
// lacks: a row skipped there would pass without attacking anything, and .ci/run is to
// provide what every row needs. Elsewhere it skips, and the summary names the row.
func unavailable(t testing.TB, ci bool, r row, why string) {
	if ci {
		t.Fatalf("%s (%s) cannot run: this host lacks %s: %s (CI=true: a row may not pass by skipping; provide it in .ci/run)", r.id, r.attack, r.need, why)
		return
	}
	t.Skipf("%s (%s): this host lacks %s: %s", r.id, r.attack, r.need, why)
}

// summary is the suite's last line: rows per surface that ran, and the skipped ones by
// name, so a reader sees what this host did not attack.
func summary(rows int, ran map[Surface]int, skipped map[Surface][]string) string {
	var b strings.Builder
	total, nskipped := 0, 0
	for _, sf := range Surfaces {
		total += ran[sf]
		nskipped += len(skipped[sf])
		fmt.Fprintf(&b, "\n  %-15s %3d ran", sf, ran[sf])
		if n := len(skipped[sf]); n > 0 {
			fmt.Fprintf(&b, ", %d skipped: %s", n, strings.Join(skipped[sf], " "))
		}
	}
	return fmt.Sprintf("escape suite: %d rows, %d ran here, %d skipped:%s", rows, total, nskipped, b.String())
}

// checkTable holds the table to its own rules: unique ids, known surfaces, every field
// filled, at least minRows rows.
func checkTable(t *testing.T, rows []row) {
	t.Helper()
	if len(rows) < minRows {
		t.Errorf("the escape table has %d rows, fewer than %d", len(rows), minRows)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.id] {
			t.Errorf("row id %s used twice", r.id)
		}
		seen[r.id] = true
		if !slices.Contains(Surfaces, r.surface) {
			t.Errorf("%s: unknown surface %q", r.id, r.surface)
		}
		if r.attack == "" || r.want == "" || r.run == nil {
			t.Errorf("%s: a row needs its attack, expected classification and run", r.id)
		}
	}
}

// TestEscapeTable checks the table alone, without running it: quick, for editing.
func TestEscapeTable(t *testing.T) {
	checkTable(t, table())
}

// TestEscapeDetectors is the control of the suite: each way a row notices an escape
// does notice one, so a row cannot pass because its sentinel is blind.
func TestEscapeDetectors(t *testing.T) {
	s := newSuite(t)
	f := s.hostFiles(t)
	if got := f.escaped(); got != "" {
		t.Fatalf("a fresh workdir reports an escape: %s", got)
	}
	for _, p := range []string{filepath.Join(f.outside, "planted.txt"), filepath.Join(f.root, "beside.txt")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if f.escaped() == "" {
			t.Errorf("a file created at %s went unnoticed", p)
		}
		os.Remove(p)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f.escaped() == "" {
		t.Error("a changed secret.txt went unnoticed")
	}
	if leaked("prefix "+secret+" suffix") == "" || leaked("root:x:0:0:root:/root:/bin/bash") == "" || leaked("harmless") != "" {
		t.Error("leaked does not tell sentinels from harmless text")
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "secret.txt"), []byte(secret), 0o644)
	os.WriteFile(filepath.Join(root, "slipped"), []byte("x"), 0o644)
	if got := treeChanged(root, map[string]bool{"secret.txt": true}); len(got) != 1 {
		t.Errorf("treeChanged = %q, want the slipped file", got)
	}
	if outlivers() != "" {
		t.Fatal("a process holding the outlive marker runs before the control starts one")
	}
	// A shell holding the marker in its arguments, checked once it says it runs: a
	// process fresh from exec may not show its arguments yet.
	sleeper := exec.Command("sh", "-c", "echo ready; read x # "+outliveMarker)
	stdin, _ := sleeper.StdinPipe()
	stdout, _ := sleeper.StdoutPipe()
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if outlivers() == "" {
		t.Error("a process left behind went unnoticed")
	}
	stdin.Close()
	sleeper.Wait()
	if o := bridgeAttack(toolCall(`"echo"`, `{"text":"hi"}`))(t, s); o.class != "passed" || o.escaped == "" {
		t.Errorf("a well-formed bridge call went unnoticed: %+v", o)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if datagramQueued(pc) {
		t.Error("an empty UDP listener reports a datagram")
	}
	c, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	if !datagramQueued(pc) {
		t.Error("a datagram sent to the UDP sentinel went unnoticed")
	}
}

// recordingTB is a testing.TB that records a failure or a skip instead of ending the
// test, for testing the suite's runner.
type recordingTB struct {
	testing.TB
	failed, skipped string
}

func (r *recordingTB) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }
func (r *recordingTB) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }

// TestNoPassBySkipping: the runner's decision for a row this host cannot run. With
// CI=true it is a failure naming the row and what the host lacks; elsewhere a skip the
// summary then names.
func TestNoPassBySkipping(t *testing.T) {
	r := row{id: "SH-01", surface: Shell, attack: "read /etc/shadow", need: needSealed}
	const why = "the OS sandbox gives tier restricted here: no user namespaces"
	ci := &recordingTB{TB: t}
	unavailable(ci, true, r, why)
	if ci.skipped != "" || !strings.Contains(ci.failed, "SH-01") || !strings.Contains(ci.failed, "lacks sealed") || !strings.Contains(ci.failed, why) {
		t.Errorf("in CI: failed %q, skipped %q; want a failure naming the row, the requirement and why", ci.failed, ci.skipped)
	}
	local := &recordingTB{TB: t}
	unavailable(local, false, r, why)
	if local.failed != "" || !strings.Contains(local.skipped, why) {
		t.Errorf("outside CI: failed %q, skipped %q; want a skip saying why", local.failed, local.skipped)
	}
	got := summary(3, map[Surface]int{WasmCore: 2}, map[Surface][]string{Shell: {"SH-01"}})
	if !strings.Contains(got, "1 skipped") || !strings.Contains(got, "skipped: SH-01") {
		t.Errorf("the summary does not name the skipped row: %s", got)
	}
}
