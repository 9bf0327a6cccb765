// Package pgstore keeps A2A tasks in PostgreSQL behind taskstore.Store: the records the
// bbolt store (taskdb) keeps — tasks with their index fields, event journals, threaded
// turns, push configs (encrypted) and blobs, runtime pins and principals' token counts —
// as rows of nine tables every replica of a gateway can reach.
//
// Writes return at once with a channel, as taskstore says. One committer goroutine
// gathers the writes of many callers (a group commit, like taskdb's) and sends each batch
// as one pipeline of statements that PostgreSQL runs as one implicit transaction: one
// round trip per batch, on a connection taken from the pool for that round trip only, so
// nothing is held open across a guest call. Reads are one query each.
//
// When the database goes away, a commit fails within Options.Timeout and every write of
// its batch receives E-STORE-015 naming the host, as a taskstore.KeptError: the store
// keeps those writes and any made while the database is away (a bounded backlog) and
// writes them, in order, before anything newer once it is back. Ready reports the failure
// at once (no I/O) so that the gateway refuses new tasks instead of queueing them, and a
// background probe notices when the database is back. The connection pool reconnects by
// itself.
//
// Without Options.Instance one gateway holds a database at a time: Open takes a
// PostgreSQL advisory lock on a connection of its own, held until Close, and a second
// gateway is refused (E-STORE-002). With it, the store is one replica's part of a
// database several gateways share (taskstore.Fleet, fleet.go).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

const part = "pgstore"

// Options tune a store; the zero value means every default.
type Options struct {
	// PushKey encrypts push configs at rest (they hold webhook credentials): the text of
	// the app's store_key, at least MinKeyLen bytes. Without it PutPush is refused
	// (E-STORE-014) and nothing else changes.
	PushKey string
	// Timeout bounds one round trip to the database (a commit, a read, a probe), so that
	// a database gone away fails a caller instead of hanging it; default 5 s.
	Timeout time.Duration
	// GroupWindow is the longest the committer gathers writes after the first while no
	// caller waits (Hurry); default 2 ms. MaxBatch is the most writes in one commit;
	// default 1000.
	GroupWindow time.Duration
	MaxBatch    int
	// MaxTurns is how many turns are kept per conversation, oldest dropped; default 100.
	MaxTurns int
	// MaxConns is the pool's size; default 8. The lock holder's connection is one more.
	MaxConns int32
	// ReadOnly opens the store for reading (store check): no migration, no lock, no
	// committer; a schema older than this release is refused with E-STORE-013 rather
	// than upgraded, and writes are refused with E-STORE-009.
	ReadOnly bool
	// Shared skips the advisory lock: more than one store on the database at once. Only
	// tests and tools that know no gateway writes meanwhile set it.
	Shared bool
	// Instance, when set, shares the database with other gateways (taskstore.Fleet): the
	// replica's name, unique among the live ones, instead of the one-gateway lock.
	// Lease is how long a replica that stops renewing keeps its tasks (DefaultLease).
	Instance string
	Lease    time.Duration
}

// MinKeyLen is the shortest store_key taken, in bytes: as much as 32 random bytes in
// base64 (openssl rand -base64 32 writes 44).
const MinKeyLen = 32

func (o Options) withDefaults() (Options, error) {
	if o.Timeout < 0 || o.GroupWindow < 0 || o.MaxBatch < 0 || o.MaxTurns < 0 || o.MaxConns < 0 {
		return o, errs.New(CodeOption, part, fmt.Sprintf("a negative option: timeout %s, group window %s, batch %d, turns %d, connections %d",
			o.Timeout, o.GroupWindow, o.MaxBatch, o.MaxTurns, o.MaxConns), "write a positive value, or zero for the default")
	}
	if o.PushKey != "" {
		if err := checkKey(o.PushKey); err != nil {
			return o, err
		}
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.GroupWindow == 0 {
		o.GroupWindow = 2 * time.Millisecond
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.MaxTurns == 0 {
		o.MaxTurns = 100
	}
	if o.MaxConns == 0 {
		o.MaxConns = 8
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Lease < MinLease || o.Lease > MaxLease {
		return o, errs.New(CodeOption, part, fmt.Sprintf("lease %s is outside %s to %s", o.Lease, MinLease, MaxLease),
			"write a lease between 2s and 10m; the default, 10s, lets a survivor take over a replica's tasks within about 11 s")
	}
	if o.Instance != "" {
		if err := taskstore.CheckID("instance", o.Instance); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Store is an open PostgreSQL task store. Its methods are safe for concurrent use.
type Store struct {
	opts  Options
	where string // host:port/database, for errors and logs: never the password
	pool  *pgxpool.Pool
	seal  atomic.Pointer[sealer] // nil without a PushKey

	mu     sync.RWMutex // held for reading while enqueueing, for writing by Close
	closed bool
	queue  chan *op
	hurry  chan struct{}
	done   chan struct{} // closed when the committer has exited
	stop   chan struct{} // closed by Close: the probe ends
	probed chan struct{} // closed when the probe has exited

	// lock is the connection that holds the advisory lock (nil: ReadOnly or Shared, or
	// lost with the database until the probe takes it again); lockMu guards it.
	lockMu sync.Mutex
	lock   *pgx.Conn

	// down is the reason the database is unreachable now (nil: it answered last).
	down atomic.Pointer[error]
	// kick wakes the probe: a round trip just failed. resumed wakes the committer: the
	// database answers again, and the backlog can be written.
	kick    chan struct{}
	resumed chan struct{}

	// The committer's own: the writes the database missed while away, in order, and
	// about how many bytes they hold.
	backlog      []*op
	backlogBytes int

	stats stats

	// fleet is the replica's part of a shared database (Options.Instance); nil otherwise.
	fleet *fleet
}

// Open connects to the PostgreSQL database dsn (a postgres:// URL or key=value string;
// TLS through sslmode), runs the schema's forward migrations under an advisory lock, and
// takes the gateway's own lock on the database. It refuses with E-STORE-015 naming the
// host when the database cannot be reached, E-STORE-012 when its schema is newer than
// this release, E-STORE-001 when the tables are not a task store's, and E-STORE-002 when
// another gateway holds the database.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	pool := s.pool
	if _, _, err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if s.locks() {
		if err := s.takeLock(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	} else if opts.Instance != "" && !opts.ReadOnly {
		if err := s.startFleet(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if opts.ReadOnly {
		close(s.done)
	} else {
		go s.commitLoop()
	}
	go s.probe()
	return s, nil
}

// poolConfig is the pool's configuration for dsn and opts.
func poolConfig(dsn string, opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errs.New(CodeDSN, part, "the store's PostgreSQL address does not parse: "+redact(err.Error(), dsn),
			"write it as postgres://user:password@host:5432/database?sslmode=verify-full (docs/operators.md \"The task store on PostgreSQL\")")
	}
	cfg.MaxConns = opts.MaxConns
	cfg.MinConns = 0
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > opts.Timeout {
		cfg.ConnConfig.ConnectTimeout = opts.Timeout
	}
	// Idle connections are closed after a while so a pool that once served a burst does
	// not keep the database's connection slots; a health check drops dead ones.
	cfg.MaxConnIdleTime = time.Minute
	cfg.HealthCheckPeriod = 10 * time.Second
	return cfg, nil
}

// newStore is a Store on cfg, not connected yet.
func newStore(cfg *pgxpool.Config, opts Options) *Store {
	s := &Store{opts: opts, where: where(cfg.ConnConfig), queue: make(chan *op, opts.MaxBatch),
		hurry: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{}), probed: make(chan struct{}),
		kick: make(chan struct{}, 1), resumed: make(chan struct{}, 1)}
	if opts.PushKey != "" {
		s.seal.Store(newSealer(opts.PushKey))
	}
	return s
}

// SetPushKey replaces the key push configs are sealed with from now on (a reload that
// changed store_key); configs sealed with the previous key no longer open (E-STORE-014).
// An empty key refuses push configs from now on.
func (s *Store) SetPushKey(key string) error {
	if key == "" {
		s.seal.Store(nil)
		return nil
	}
	if err := checkKey(key); err != nil {
		return err
	}
	s.seal.Store(newSealer(key))
	return nil
}

// checkKey refuses a store key shorter than MinKeyLen (E-STORE-014).
func checkKey(key string) error {
	if len(key) < MinKeyLen {
		return errs.New(CodeKey, part, fmt.Sprintf("store_key is %d bytes long; it must be at least %d", len(key), MinKeyLen),
			"generate one with `openssl rand -base64 32` and pass it from the environment, such as store_key {env.CAPSULE_STORE_KEY}")
	}
	return nil
}

// Where is the database the store keeps its tasks in, as host:port/database.
func (s *Store) Where() string { return s.where }

// Close commits what is queued, waits for it, releases the advisory lock and closes the
// connections. Writes after Close are refused with E-STORE-006.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	close(s.stop)
	<-s.probed
	s.stopFleet()
	s.lockMu.Lock()
	if s.lock != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		_ = s.lock.Close(ctx) // ending the session releases its advisory lock
		cancel()
		s.lock = nil
	}
	s.lockMu.Unlock()
	s.pool.Close()
	return nil
}

// Ready reports, without a round trip, whether the database answered the store's last
// contact and holds every write kept while it was away: nil, or the E-STORE-015 error of
// the failure (E-STORE-002 when another gateway took the lock while the database was
// away), or an E-STORE-015 error counting the kept writes not written yet.
func (s *Store) Ready() error {
	if p := s.down.Load(); p != nil {
		return *p
	}
	if n := s.stats.backlog.Load(); n > 0 {
		return errs.New(CodeUnreachable, part, fmt.Sprintf("the task store's database at %s is back; %d writes kept while it was away are being written", s.where, n),
			"wait: the gateway takes new tasks once they are written").At(s.where, "")
	}
	return nil
}

// Ping makes one round trip to the database within ctx and the store's timeout, and
// reports the outcome as Ready does afterwards.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := s.pool.Ping(ctx)
	s.stats.roundTrip(time.Since(start), err)
	if err != nil {
		return s.failed(err)
	}
	if err := s.answered(); err != nil {
		return err
	}
	return s.Ready() // the writes kept while the database was away, until written
}

// answered records that the database answered: Ready is nil again unless the lock is
// still missing, which the probe takes.
func (s *Store) answered() error {
	if s.locks() {
		s.lockMu.Lock()
		missing := s.lock == nil
		s.lockMu.Unlock()
		if missing {
			s.wake()
			if p := s.down.Load(); p != nil {
				return *p
			}
		}
	}
	if s.down.Swap(nil) != nil {
		select {
		case s.resumed <- struct{}{}:
		default:
		}
	}
	return nil
}

// failed records err of a round trip as the store's state, when it says the database is
// unreachable (not a refusal of one statement), and returns the error callers receive.
func (s *Store) failed(err error) error {
	if !isConnErr(err) {
		return err
	}
	e := s.unreachable(err)
	s.down.Store(&e)
	s.wake()
	return e
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// probeEvery is how often the probe tries a database that is away.
const probeEvery = 250 * time.Millisecond

// probe runs while the store is open: after a failed round trip it pings every
// probeEvery until the database answers and the advisory lock is held again, so that
// Ready turns nil by itself, without waiting for a client's request to find out. While
// all is well it checks the lock holder's session every lockCheckEvery: a database that
// restarted between two writes took the lock with that session.
func (s *Store) probe() {
	defer close(s.probed)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	ticks := 0
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-t.C:
			ticks++
			if s.down.Load() == nil && (ticks%int(lockCheckEvery/probeEvery) != 0 || s.lockHeld()) {
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		_ = s.recover(ctx)
		cancel()
	}
}

// lockCheckEvery is how often the probe checks the advisory lock's session while the
// database answers: a round trip a second, none per task.
const lockCheckEvery = time.Second

// lockHeld reports whether the lock holder's session answers (always true without a lock).
func (s *Store) lockHeld() bool {
	if !s.locks() {
		return true
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.lock == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := s.lock.Ping(ctx)
	s.stats.roundTrip(time.Since(start), err)
	return err == nil
}

// recover checks the lock holder's session and the pool, taking the lock again when its
// connection was lost.
func (s *Store) recover(ctx context.Context) error {
	if s.locks() {
		s.lockMu.Lock()
		lost := s.lock == nil || s.lock.Ping(ctx) != nil
		s.lockMu.Unlock()
		if lost {
			if err := s.takeLock(ctx); err != nil {
				if !isConnErr(err) && errs.Find(err, CodeUnreachable) == nil {
					s.down.Store(&err)
				}
				return err
			}
		}
	}
	return s.Ping(ctx)
}

// locks reports whether the store holds the one-gateway lock: written by one gateway,
// not ReadOnly, Shared or one replica of several (Instance).
func (s *Store) locks() bool {
	return !s.opts.ReadOnly && !s.opts.Shared && s.opts.Instance == ""
}

// lockKey is the advisory lock a gateway holds on its database: a fixed 64-bit number,
// the first eight bytes of "capsulegate.tasks" read as one.
const lockKey int64 = 0x636170_7375_6c65

// takeLock opens the lock holder's connection and takes the advisory lock on it.
func (s *Store) takeLock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.lock != nil {
		_ = s.lock.Close(ctx)
		s.lock = nil
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return s.failed(err)
	}
	var got bool
	start := time.Now()
	err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockKey).Scan(&got)
	s.stats.roundTrip(time.Since(start), err)
	if err != nil {
		_ = conn.Close(ctx)
		return s.failed(err)
	}
	if !got {
		_ = conn.Close(ctx)
		return errs.New(CodeLocked, part, "another gateway holds the task store at "+s.where,
			"stop the other gateway, or give each gateway its own database: until gateways share one (several gateways as one service), one gateway holds a store").At(s.where, "")
	}
	s.lock = conn
	return nil
}

// unreachable is the E-STORE-015 error of a database that did not answer.
func (s *Store) unreachable(err error) error {
	return errs.Wrap(errors.New(redact(err.Error(), "")), CodeUnreachable, part, "the task store's database at "+s.where+" cannot be reached",
		"check that PostgreSQL runs and accepts connections from this host (the address, sslmode, the user's password); the gateway retries by itself").At(s.where, "")
}

// isConnErr reports whether err says the database could not be reached or the
// connection broke, rather than that it refused a statement: a connection that cannot be
// made, whatever the server said (a refused password, a missing database), is one.
func isConnErr(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions, 57P0x the server shutting down or starting.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// where names the database of cfg as host:port/database.
func where(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s/%s", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), cfg.Database)
}

// redact removes a password from text: the DSN's, when the text quotes it.
func redact(text, dsn string) string {
	if dsn == "" {
		return text
	}
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.Password != "" {
		text = strings.ReplaceAll(text, cfg.Password, "xxxxx")
	}
	if i := strings.Index(dsn, "://"); i >= 0 {
		if j := strings.Index(dsn[i+3:], "@"); j >= 0 {
			if k := strings.Index(dsn[i+3:i+3+j], ":"); k >= 0 {
				text = strings.ReplaceAll(text, dsn[i+3+k+1:i+3+j], "xxxxx")
			}
		}
	}
	return text
}

// timeout is a context bounded by the store's timeout.
func (s *Store) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.Timeout)
}

var _ taskstore.Store = (*Store)(nil)
