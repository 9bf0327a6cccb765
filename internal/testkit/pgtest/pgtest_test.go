package pgtest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	defer CloseShared()
	m.Run()
}

func connect(t *testing.T, dsn string) (*pgx.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pgx.Connect(ctx, dsn)
}

// selectOne connects to dsn and runs SELECT 1, leaving the connection open.
func selectOne(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := connect(t, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	return conn
}

func TestStartStopResume(t *testing.T) {
	Need(t)
	t0 := time.Now()
	c, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %v (port %d, folder %s)", time.Since(t0).Round(time.Millisecond), c.Port(), c.dir)
	t.Cleanup(func() { c.Close() })
	if want := "127.0.0.1:" + strconv.Itoa(c.Port()); c.Addr() != want {
		t.Errorf("Addr() = %q, want %q", c.Addr(), want)
	}

	t0 = time.Now()
	dsn, err := c.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CreateDatabase took %v: %s", time.Since(t0).Round(time.Millisecond), dsn)
	if want := "postgres://capsulegate@" + c.Addr() + "/"; !strings.HasPrefix(dsn, want) || !strings.HasSuffix(dsn, "?sslmode=disable") {
		t.Errorf("DSN %q, want %s<db>?sslmode=disable", dsn, want)
	}
	selectOne(t, dsn).Close(context.Background())

	port := c.Port()
	t0 = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %v", time.Since(t0).Round(time.Millisecond))
	if conn, err := connect(t, dsn); err == nil {
		conn.Close(context.Background())
		t.Fatal("connected to a stopped server")
	}

	t0 = time.Now()
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Resume took %v", time.Since(t0).Round(time.Millisecond))
	if c.Port() != port {
		t.Errorf("port after Resume %d, want %d", c.Port(), port)
	}
	conn := selectOne(t, dsn)

	db := DatabaseName(dsn)
	waitConnections(t, c, db, 1)
	// The asking connection is not counted; the one the call before opened and closed
	// leaves pg_stat_activity a moment after its close.
	waitConnections(t, c, "postgres", 0)
	conn.Close(context.Background())
	waitConnections(t, c, db, 0)

	dir := c.dir
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster folder %s after Close: %v", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Resume(); err == nil {
		t.Error("Resume after Close succeeded")
	}
}

func TestSharedDatabases(t *testing.T) {
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two NewDatabase calls gave %s", a)
	}
	if Shared(t) != Shared(t) {
		t.Error("Shared started two clusters")
	}
	selectOne(t, a)
	selectOne(t, b)
}

// A cluster whose test binary died without Close is stopped and removed by the next Start.
func TestStaleClusterRemoved(t *testing.T) {
	Need(t)
	stale, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stale.Close() })
	// Play the dead owner: a finished process's pid.
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale.dir, ownerFile), []byte(strconv.Itoa(exited.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, err := readPid(filepath.Join(stale.data(), pidFile))
	if err != nil {
		t.Fatal(err)
	}

	c, err := Start(Options{Durable: true, Settings: map[string]string{"work_mem": "8MB", "application_name": "it's"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := os.Stat(stale.dir); !os.IsNotExist(err) {
		t.Errorf("stale cluster folder %s: %v", stale.dir, err)
	}
	// pg_ctl stop -w returns once the lock file is gone, a moment before the process is.
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("stale server %d still runs", pid)
			break
		}
	}

	conn := selectOne(t, c.DSN("postgres"))
	for name, want := range map[string]string{"fsync": "on", "work_mem": "8MB", "max_connections": "200", "application_name": "it's"} {
		var got string
		if err := conn.QueryRow(context.Background(), "SELECT current_setting($1)", name).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestSettingsRejected(t *testing.T) {
	for _, k := range []string{"port", "listen_addresses", "unix_socket_directories", "a b", ""} {
		if _, err := settings(Options{Settings: map[string]string{k: "1"}}); err == nil {
			t.Errorf("setting %q accepted", k)
		}
	}
}

func TestBinariesFromEnv(t *testing.T) {
	t.Setenv(binEnv, t.TempDir())
	_, err := Binaries()
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") || !strings.Contains(err.Error(), "initdb") {
		t.Errorf("Binaries with an empty $%s: %v", binEnv, err)
	}
}

// Resume retries while something else holds the port for a moment.
func TestResumeWaitsForPort(t *testing.T) {
	Need(t)
	c, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// The port is given back once the server has found it taken (its log says so), not
	// after a fixed time a slow machine's first try could outlast.
	logPath := filepath.Join(c.dir, logFile)
	go func() {
		defer l.Close()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if log, _ := os.ReadFile(logPath); strings.Contains(string(log), "Address already in use") {
				return
			}
		}
	}()
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), "Address already in use") {
		t.Errorf("the server never found its port taken; log:\n%s", log)
	}
	selectOne(t, c.DSN("postgres"))
}

// waitConnections waits until c counts want connections to database db: a connection
// just closed leaves PostgreSQL's count a moment after its client let go of it.
func waitConnections(t *testing.T, c *Cluster, db string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Connections(db)
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Connections(%s) = %d for 10 s, want %d", db, n, want)
		}
		time.Sleep(20 * time.Millisecond) // polling PostgreSQL's count
	}
}
