// Package pgtest starts real PostgreSQL servers for tests: a throwaway cluster in a temp
// folder, listening on a free loopback port, trusted without a password, with the
// durability settings off so that it is fast.
//
// A test that needs PostgreSQL calls Need (skipped when the binaries are missing, failed
// under CI=true), then either Start for a cluster of its own or NewDatabase for a fresh
// database on the cluster the whole test binary shares (Shared). Packages using the shared
// cluster stop it from TestMain:
//
//	func TestMain(m *testing.M) {
//		defer pgtest.CloseShared()
//		m.Run()
//	}
//
// When root, the server runs as the user postgres (or nobody), as PostgreSQL refuses to
// run as root. A test binary that dies without closing its clusters leaves them running;
// the next Start in any test binary stops and removes them (see Start).
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/internal/testkit/ports"
	"github.com/capsulegate/capsulegate/internal/testkit/serverproc"
)

const (
	binEnv     = "CAPSULEGATE_PG_BIN"
	superuser  = "capsulegate"
	dirPrefix  = "capsulegate-pg-"
	ownerFile  = "owner.pid"  // the pid of the process that made the cluster folder
	logFile    = "server.log" // pg_ctl -l: the server's log
	dataSubdir = "data"
	pidFile    = "postmaster.pid" // the server's own lock file in the data folder
	tries      = 5                // starts on a busy port before giving up
	installFix = "apt-get install postgresql"
)

var binaries = []string{"initdb", "pg_ctl", "postgres"}

// Binaries finds the folder holding initdb, pg_ctl and postgres: $CAPSULEGATE_PG_BIN if
// set, else the newest /usr/lib/postgresql/<version>/bin (where Debian's package puts them,
// off PATH), else PATH; an error says what is missing.
func Binaries() (dir string, err error) {
	if dir := os.Getenv(binEnv); dir != "" {
		if missing := missingIn(dir); len(missing) > 0 {
			return "", fmt.Errorf("pgtest: $%s=%s has no %s: point it at PostgreSQL's bin folder, or unset it and %s",
				binEnv, dir, strings.Join(missing, ", "), installFix)
		}
		return dir, nil
	}
	if dir := newestDebian("/usr/lib/postgresql"); dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// pg_ctl runs the postgres beside its real self, so follow a symlink to that folder.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir, err := filepath.Abs(filepath.Dir(p)); err == nil && len(missingIn(dir)) == 0 {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgtest: PostgreSQL's initdb, pg_ctl and postgres are missing ($%s unset, none in /usr/lib/postgresql/<version>/bin nor on PATH): %s",
		binEnv, installFix)
}

// missingIn lists the binaries dir lacks as executable files.
func missingIn(dir string) []string {
	var missing []string
	for _, name := range binaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

// newestDebian returns root/<version>/bin for the highest version that has every binary.
func newestDebian(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type cand struct {
		dir string
		ver []int
	}
	var cands []cand
	for _, e := range entries {
		var ver []int
		for _, part := range strings.Split(e.Name(), ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				ver = nil
				break
			}
			ver = append(ver, n)
		}
		if ver != nil {
			cands = append(cands, cand{filepath.Join(root, e.Name(), "bin"), ver})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return slices.Compare(b.ver, a.ver) })
	for _, c := range cands {
		if len(missingIn(c.dir)) == 0 {
			return c.dir
		}
	}
	return ""
}

// Need is called by tests that need PostgreSQL: when the binaries are missing it fails the
// test under CI=true, where a skip would hide that nothing was tested, and skips it
// elsewhere, both saying what is missing and how to install it.
func Need(t testing.TB) {
	t.Helper()
	if _, err := Binaries(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Options tunes Start.
type Options struct {
	// Durable keeps fsync, synchronous_commit and full_page_writes on (and initdb
	// syncing), for tests of crash behaviour; off, a test cluster is several times faster.
	Durable bool
	// Settings are server settings (name → value) passed as -c name=value, over the
	// defaults; port, listen_addresses and unix_socket_directories are Start's own.
	Settings map[string]string
	// TLSCert and TLSKey, when set (PEM), turn TLS on: the server offers it with this
	// certificate, and a client's sslmode decides whether it must be used and checked.
	TLSCert, TLSKey []byte
}

// Cluster is one running (or stopped) PostgreSQL server and its data folder.
type Cluster struct {
	bin  string              // the folder of initdb, pg_ctl and postgres
	dir  string              // the cluster folder: data/, server.log, owner.pid and the unix socket
	who  *serverproc.Account // the account the server runs as; nil: ours
	conf []string            // the server's settings as name=value, in order

	mu      sync.Mutex
	port    int
	running bool
	closed  bool
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// settings merges opts over the defaults, sorted by name so the command line is stable.
func settings(opts Options) ([]string, error) {
	m := map[string]string{"max_connections": "200"}
	if !opts.Durable {
		m["fsync"], m["synchronous_commit"], m["full_page_writes"] = "off", "off", "off"
	}
	for k, v := range opts.Settings {
		switch {
		case !settingName.MatchString(k):
			return nil, fmt.Errorf("pgtest: setting name %q is not a PostgreSQL setting name", k)
		case k == "port" || k == "listen_addresses" || k == "unix_socket_directories":
			return nil, fmt.Errorf("pgtest: setting %s is Start's own (the server listens on 127.0.0.1 on a free port)", k)
		}
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// Start initialises a cluster in a new folder under the temp folder and starts it on a
// free port of 127.0.0.1 only (trying another port when the chosen one was taken in the
// meantime), with unix_socket_directories set to that folder rather than
// /var/run/postgresql. Before that it removes the clusters that test binaries which died
// without Close left behind: a capsulegate-pg-* folder whose owner.pid names a process
// that is gone, stopping its server first if that still runs. The caller must Close the
// cluster.
func Start(opts Options) (*Cluster, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	conf, err := settings(opts)
	if err != nil {
		return nil, err
	}
	who, err := serverAccount()
	if err != nil {
		return nil, err
	}
	base := baseDir(who)
	removeStale(base, bin, who)

	dir, err := os.MkdirTemp(base, dirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("pgtest: cluster folder: %w", err)
	}
	c := &Cluster{bin: bin, dir: dir, who: who, conf: conf}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	// Written first, so that no other Start takes the new folder for a stale one.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := who.Own(dir); err != nil {
		return nil, fmt.Errorf("pgtest: giving the cluster folder to the server's user: %w", err)
	}

	args := []string{"-D", c.data(), "-U", superuser, "--auth=trust", "-E", "UTF8", "--no-locale"}
	if !opts.Durable {
		args = append(args, "--no-sync")
	}
	if out, err := c.run(2*time.Minute, "initdb", args...); err != nil {
		return nil, fmt.Errorf("pgtest: initdb in %s: %v\n%s", c.data(), err, out)
	}
	if opts.TLSCert != nil {
		// In the data folder, the server's own: PostgreSQL refuses a key others may read.
		for name, b := range map[string][]byte{"server.crt": opts.TLSCert, "server.key": opts.TLSKey} {
			if err := os.WriteFile(filepath.Join(c.data(), name), b, 0o600); err != nil {
				return nil, fmt.Errorf("pgtest: %w", err)
			}
		}
		if err := who.Own(c.data()); err != nil {
			return nil, fmt.Errorf("pgtest: giving the TLS files to the server's user: %w", err)
		}
		c.conf = append(c.conf, "ssl=on", "ssl_cert_file=server.crt", "ssl_key_file=server.key")
	}

	for i := 0; ; i++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		busy, err := c.start()
		if err == nil {
			ok = true
			return c, nil
		}
		if !busy || i == tries-1 {
			return nil, err
		}
	}
}

// data is the data folder, as initdb and pg_ctl -D take it.
func (c *Cluster) data() string { return filepath.Join(c.dir, dataSubdir) }

// Port is the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.port
}

// Addr is the server's address, "127.0.0.1:<port>".
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port())) }

// DSN is the URL of database db as the superuser, which needs no password:
// postgres://capsulegate@127.0.0.1:<port>/<db>?sslmode=disable.
func (c *Cluster) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(superuser), Host: c.Addr(), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

var dbCounter atomic.Uint64

// DatabaseName is the database a postgres:// URL names ("" when it names none).
func DatabaseName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// CreateDatabase creates a database with a fresh name, t<counter>_<random> (the random
// part keeps test binaries sharing a server apart), and returns its DSN.
func (c *Cluster) CreateDatabase() (string, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("t%d_%s", dbCounter.Add(1), hex.EncodeToString(rnd[:]))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: creating a database: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: CREATE DATABASE %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// Connections counts the client connections to database db, asked over a fresh
// connection to database "postgres" that is not counted; a connection closed a moment
// ago may still count until its server process has exited, so wait for a drop by polling.
func (c *Cluster) Connections(db string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: counting connections: %w", err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, db).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgtest: counting connections: %w", err)
	}
	return n, nil
}

// Stop stops the server (pg_ctl stop -m fast: sessions are ended, data is kept), so that
// a test can see what its code does while the database is down; Resume starts it again.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("pgtest: Stop on a closed cluster")
	}
	if !c.running {
		return nil
	}
	if out, err := c.run(2*time.Minute, "pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v\n%s%s", err, out, c.logTail(0))
	}
	c.running = false
	return nil
}

// Resume starts a stopped server again on the same port, retrying a few times while the
// port is still taken (as by a client's socket in the moment after Stop).
func (c *Cluster) Resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("pgtest: Resume on a closed cluster")
	}
	if c.running {
		return nil
	}
	for i := 1; ; i++ {
		busy, err := c.start()
		if err == nil || !busy || i == tries {
			return err
		}
		time.Sleep(time.Duration(i) * 200 * time.Millisecond)
	}
}

// start runs pg_ctl start on c.port; busy says the failure was the port being taken.
func (c *Cluster) start() (busy bool, err error) {
	logPath := filepath.Join(c.dir, logFile)
	var from int64
	if fi, err := os.Stat(logPath); err == nil {
		from = fi.Size()
	}
	out, err := c.run(2*time.Minute, "pg_ctl", "start", "-w", "-t", "60", "-D", c.data(), "-l", logPath, "-o", c.serverArgs())
	if err == nil {
		c.running = true
		return false, nil
	}
	// pg_ctl may have given up waiting on a server that still comes up: stop that one.
	if _, statErr := os.Stat(filepath.Join(c.data(), pidFile)); statErr == nil {
		_, _ = c.run(time.Minute, "pg_ctl", "stop", "-D", c.data(), "-m", "immediate", "-w", "-t", "30")
	}
	log := c.logTail(from)
	busy = strings.Contains(log, "Address already in use") || strings.Contains(log, "could not create any TCP/IP sockets")
	return busy, fmt.Errorf("pgtest: pg_ctl start on port %d: %v\n%s%s", c.port, err, out, log)
}

// serverArgs is pg_ctl's -o: postgres's options, each quoted for the shell pg_ctl runs
// postgres through.
func (c *Cluster) serverArgs() string {
	sockets := c.dir
	if len(c.dir)+len("/.s.PGSQL.65535") > 100 { // beyond a unix socket path's limit: TCP only
		sockets = ""
	}
	args := []string{"-p", strconv.Itoa(c.port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + sockets}
	for _, kv := range c.conf {
		args = append(args, "-c", kv)
	}
	for i, a := range args {
		args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(args, " ")
}

// Close stops the server at once (pg_ctl stop -m immediate) and removes the cluster
// folder; calling it again does nothing.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	pid := filepath.Join(c.data(), pidFile)
	if _, err := os.Stat(pid); err == nil {
		out, err := c.run(time.Minute, "pg_ctl", "stop", "-D", c.data(), "-m", "immediate", "-w", "-t", "30")
		if _, statErr := os.Stat(pid); err != nil && statErr == nil {
			errs = append(errs, fmt.Errorf("pgtest: pg_ctl stop: %v\n%s%s", err, out, c.logTail(0)))
		}
	}
	c.running = false
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgtest: removing the cluster folder: %w", err))
	}
	return errors.Join(errs...)
}

// run runs one of the binaries as the server's account in the cluster folder and returns
// its output.
func (c *Cluster) run(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return command(ctx, c.bin, c.dir, c.who, name, args...).CombinedOutput()
}

// command builds a command for one of the binaries, run in dir (the user may not reach
// the caller's working folder), as who, without PG* variables that would redirect it
// and in the C locale so its messages are the ones this package looks for.
func command(ctx context.Context, bin, dir string, who *serverproc.Account, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Dir = dir
	// pg_ctl's server does not keep its output, but do not hang on it if one ever did.
	cmd.WaitDelay = 10 * time.Second
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" ||
			(who != nil && k == "HOME") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "LC_ALL=C")
	if who != nil {
		env = append(env, "HOME="+dir)
	}
	cmd.Env = env
	who.Apply(cmd)
	return cmd
}

// logTail is the server log from offset from, at most its last 4 KiB, for an error.
func (c *Cluster) logTail(from int64) string {
	return serverproc.LogTail(filepath.Join(c.dir, logFile), "server log", from, 4<<10)
}

// serverAccount is the account to run PostgreSQL as: nil (ours) unless we are root, which
// PostgreSQL refuses to run as; then postgres, or nobody where there is no postgres user.
func serverAccount() (*serverproc.Account, error) {
	who, err := serverproc.Unprivileged("postgres", "nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and no user to run PostgreSQL as: %w", err)
	}
	return who, nil
}

// freePort picks the server's port with ports.Free: below the ephemeral range, so that a
// client of the stopped server cannot be given it and keep it from a Resume.
func freePort() (int, error) {
	port, err := ports.Free()
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	return port, nil
}

// baseDir is where cluster folders go: the temp folder, unless the server's account
// could not reach it there (a root-only TMPDIR), then /tmp.
func baseDir(who *serverproc.Account) string {
	base := os.TempDir()
	if who != nil && !serverproc.Traversable(base) {
		return "/tmp"
	}
	return base
}

// removeStale stops and removes the clusters under base that their test binaries left
// behind, best effort: one whose owner process is alive is in use (even stopped, to be
// resumed), and a folder without owner.pid may be a moment old, so wait a minute for it.
func removeStale(base, bin string, who *serverproc.Account) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, dir := range dirs {
		if owner, err := readPid(filepath.Join(dir, ownerFile)); err == nil {
			if alive(owner) {
				continue
			}
		} else if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		data := filepath.Join(dir, dataSubdir)
		if pid, err := readPid(filepath.Join(data, pidFile)); err == nil && alive(pid) && serves(pid, data) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_ = command(ctx, bin, dir, who, "pg_ctl", "stop", "-D", data, "-m", "immediate", "-w", "-t", "30").Run()
			cancel()
		}
		// Should the stop have failed, the server shuts itself down on finding its lock
		// file gone.
		_ = os.RemoveAll(dir)
	}
}

// serves says whether process pid is a server of the data folder data, as far as /proc
// tells (a pid in a stale postmaster.pid may since name another process); without /proc,
// yes.
func serves(pid int, data string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && !exists("/proc/self")
	}
	return bytes.Contains(b, []byte(data))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readPid reads the number on the first line of file, as owner.pid and postmaster.pid
// hold it.
func readPid(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: no pid", file)
	}
	return pid, nil
}

var shared struct {
	mu      sync.Mutex
	cluster *Cluster
	err     error
}

// Shared returns the cluster the whole test binary shares, started by the first call;
// it calls Need first and fails t if the cluster does not start (then every later call
// fails at once, rather than waiting for another start to fail). CloseShared stops it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	Need(t)
	shared.mu.Lock()
	if shared.cluster == nil && shared.err == nil {
		shared.cluster, shared.err = Start(Options{})
	}
	c, err := shared.cluster, shared.err
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: the shared cluster: %v", err)
	}
	return c
}

// CloseShared closes the shared cluster if one was started, so that its server does not
// outlive the test binary; call it from TestMain after m.Run. A later Shared starts a new
// one.
func CloseShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		if err := shared.cluster.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	shared.cluster, shared.err = nil, nil
}

// NewDatabase creates a fresh database on the shared cluster and returns its DSN, failing
// t on error.
func NewDatabase(t testing.TB) string {
	t.Helper()
	dsn, err := Shared(t).CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}
