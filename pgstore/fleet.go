package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Several gateways on one database (Options.Instance): each replica registers itself in
// capsulegate_instances and renews its row every lease/3; a task's runner column names
// the replica running it, and a replica whose row was not renewed within its lease is
// dead: its tasks are orphans, reported to every survivor each orphanEvery, adopted by
// the first that takes them. Signals between the replicas travel on one LISTEN/NOTIFY
// channel; the committer sends the journal's signals inside the batch that writes the
// events, so they arrive once the events are readable. Times of the leases are the
// database's clock, never a replica's.

// channel is the NOTIFY channel of the replicas' signals.
const channel = "capsulegate"

// sqlNow is the database's clock in Unix nanoseconds.
const sqlNow = `(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`

// DefaultLease is Options.Lease's default: a replica killed is known dead within it.
const DefaultLease = 10 * time.Second

// Bounds of Options.Lease.
const (
	MinLease = 2 * time.Second
	MaxLease = 10 * time.Minute
)

// orphanEvery is how often a replica looks for the tasks of dead replicas: a failover
// takes at most the lease and this.
const orphanEvery = time.Second

// leaderKey is the advisory lock of the fleet's singleton jobs: "capsulegate.leader".
const leaderKey int64 = 0x6361_7073_6c65_6164

// fleet is the replica's part of a shared database.
type fleet struct {
	name  string
	lease time.Duration

	servesMu sync.Mutex
	serves   map[string]string // capsule → the digest it serves here
	// writeMu orders the writes of the row's serves (Serve's, each renewal's): each
	// reads the map and writes it under the lock, so the last write holds the latest
	// map. Unordered, the renewal that runs as the replica starts wrote the empty map
	// after the first Serve, and other replicas took that version's tasks until the next
	// renewal.
	writeMu sync.Mutex

	watchMu  sync.Mutex
	watchers map[string]map[int]func(taskstore.Signal)
	nextWID  int

	leader atomic.Bool
	// predecessor says a replica of this name died before this one started: its tasks
	// are this replica's to adopt, reported to each capsule's first watcher.
	predecessor bool

	listening atomic.Bool
	// upSince is when a renewal succeeded again after failing (Unix nanoseconds; 0: none
	// failed): orphans are looked for only a lease after it.
	upSince atomic.Int64

	stop chan struct{}
	done sync.WaitGroup
}

// Instance is the replica's name ("" for a store not shared).
func (s *Store) Instance() string {
	if s.fleet == nil {
		return ""
	}
	return s.fleet.name
}

// Lease is how long a replica that stops renewing keeps its tasks.
func (s *Store) Lease() time.Duration {
	if s.fleet == nil {
		return 0
	}
	return s.fleet.lease
}

// Leader reports whether this replica holds the fleet's singleton jobs: always true for
// a store not shared.
func (s *Store) Leader() bool { return s.fleet == nil || s.fleet.leader.Load() }

// Serve records that this replica runs digest of capsule ("" when it stops serving it)
// and tells the others now, before the capsule admits a task: a task it admits waits for
// a replica of its version from the start. Should the write fail, the next renewal
// repeats it.
func (s *Store) Serve(capsule, digest string) {
	f := s.fleet
	if f == nil {
		return
	}
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	f.servesMu.Lock()
	if digest == "" {
		delete(f.serves, capsule)
	} else {
		f.serves[capsule] = digest
	}
	f.servesMu.Unlock()
	ctx, cancel := s.timeout()
	defer cancel()
	start := time.Now()
	_, err := s.pool.Exec(ctx, `UPDATE capsulegate_instances SET serves = $2 WHERE name = $1`, f.name, f.served())
	s.stats.roundTrip(time.Since(start), err)
}

func (f *fleet) served() []string {
	f.servesMu.Lock()
	defer f.servesMu.Unlock()
	out := make([]string, 0, len(f.serves))
	for c, d := range f.serves {
		out = append(out, c+"@"+d)
	}
	slices.Sort(out)
	return out
}

// startFleet registers the replica and starts its renewals, orphan scans and the
// listener. A live row of the same name is waited out for at most its lease: a gateway
// restarted at once after a kill takes its name back once the old lease ran out; a name
// still renewed after that is another gateway's, and refused (E-STORE-002).
func (s *Store) startFleet(ctx context.Context) error {
	o := s.opts
	f := &fleet{name: o.Instance, lease: o.Lease, serves: map[string]string{},
		watchers: map[string]map[int]func(taskstore.Signal){}, stop: make(chan struct{})}
	deadline := time.Now().Add(f.lease + time.Second)
	for {
		fresh, existed, err := s.register(ctx, f)
		if err != nil {
			return err
		}
		if fresh {
			f.predecessor = existed
			break
		}
		if time.Now().After(deadline) {
			return errs.New(CodeLocked, part, fmt.Sprintf("instance %q is live on the task store at %s: another gateway runs under that name", f.name, s.where),
				"give every gateway its own instance name (the default, host name and process id, always is)").At(s.where, "")
		}
		select {
		case <-ctx.Done():
			return s.unreachable(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Signals flow before Open returns: none of this replica's first writes' is missed.
	conn, err := s.listen(ctx)
	if err != nil {
		_, _ = s.pool.Exec(ctx, `DELETE FROM capsulegate_instances WHERE name = $1`, f.name)
		return s.unreachable(err)
	}
	s.fleet = f
	f.done.Add(3)
	go s.renewLoop()
	go s.orphanLoop()
	go s.listenLoop(conn)
	return nil
}

// register adds the replica's row, or takes over one whose lease ran out; fresh is false
// while a live replica holds the name, existed says a row of the name was there.
func (s *Store) register(ctx context.Context, f *fleet) (fresh, existed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	start := time.Now()
	err = s.pool.QueryRow(ctx, `WITH old AS (SELECT name FROM capsulegate_instances WHERE name = $1),
		up AS (INSERT INTO capsulegate_instances (name, seen, lease, started) VALUES ($1, `+sqlNow+`, $2, `+sqlNow+`)
		  ON CONFLICT (name) DO UPDATE SET seen = excluded.seen, lease = excluded.lease, started = excluded.started, serves = '{}'
		  WHERE capsulegate_instances.seen + capsulegate_instances.lease < excluded.seen RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM up), EXISTS (SELECT 1 FROM old)`, f.name, int64(f.lease)).Scan(&fresh, &existed)
	s.stats.roundTrip(time.Since(start), err)
	if err != nil {
		if isConnErr(err) {
			return false, false, s.unreachable(err)
		}
		return false, false, fmt.Errorf("pgstore: registering instance %q: %w", f.name, err)
	}
	return fresh, existed, nil
}

// stopFleet ends the replica's loops and removes its row, so that the others adopt what
// it leaves at once rather than after its lease.
func (s *Store) stopFleet() {
	f := s.fleet
	if f == nil {
		return
	}
	close(f.stop)
	f.done.Wait()
	ctx, cancel := s.timeout()
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM capsulegate_instances WHERE name = $1`, f.name)
}

// renewLoop renews the replica's row every lease/3 and holds or tries the leader lock.
func (s *Store) renewLoop() {
	f := s.fleet
	defer f.done.Done()
	var leaderConn *pgx.Conn
	defer func() {
		if leaderConn != nil {
			ctx, cancel := s.timeout()
			_ = leaderConn.Close(ctx)
			cancel()
		}
	}()
	t := time.NewTicker(f.lease / 3)
	defer t.Stop()
	failed := false
	for {
		ctx, cancel := s.timeout()
		start := time.Now()
		f.writeMu.Lock()
		_, err := s.pool.Exec(ctx, `INSERT INTO capsulegate_instances (name, seen, lease, started, serves) VALUES ($1, `+sqlNow+`, $2, `+sqlNow+`, $3)
			ON CONFLICT (name) DO UPDATE SET seen = excluded.seen, lease = excluded.lease, serves = excluded.serves`, f.name, int64(f.lease), f.served())
		f.writeMu.Unlock()
		s.stats.roundTrip(time.Since(start), err)
		if err != nil {
			s.failed(err)
			failed = true
		} else if failed {
			failed = false
			f.upSince.Store(time.Now().UnixNano())
		}
		leaderConn = s.holdLeader(ctx, leaderConn)
		cancel()
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
	}
}

// holdLeader checks the leader lock's session, or tries to take the lock on a new one;
// it returns the session holding it (nil: another replica leads).
func (s *Store) holdLeader(ctx context.Context, conn *pgx.Conn) *pgx.Conn {
	f := s.fleet
	if conn != nil {
		if conn.Ping(ctx) == nil {
			return conn
		}
		_ = conn.Close(ctx)
		f.leader.Store(false)
	}
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil
	}
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", leaderKey).Scan(&got); err != nil || !got {
		_ = conn.Close(ctx)
		return nil
	}
	f.leader.Store(true)
	return conn
}

// orphanLoop reports, every orphanEvery, the tasks of replicas whose lease ran out: those
// not finished, and finished ones with push deliveries left.
func (s *Store) orphanLoop() {
	f := s.fleet
	defer f.done.Done()
	t := time.NewTicker(orphanEvery)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if s.down.Load() != nil || !f.hasWatchers() {
			continue
		}
		if up := f.upSince.Load(); up != 0 && time.Since(time.Unix(0, up)) < f.lease {
			// Back from an outage that may have outlasted the leases: every live replica
			// renews within a lease before anyone's tasks are taken for orphans.
			continue
		}
		// The tasks of dead runners, and those a gateway before the fleet left running (no
		// runner, not queued); unfinished, or finished with push deliveries left.
		got, err := query(s, `SELECT t.capsule, t.id, coalesce(t.runner, '') FROM capsulegate_tasks t
			WHERE NOT t.done AND ((t.runner IS NOT NULL AND t.runner <> $1
			  AND NOT EXISTS (SELECT 1 FROM capsulegate_instances i WHERE i.name = t.runner AND i.seen + i.lease > `+sqlNow+`))
			  OR (t.runner IS NULL AND t.state <> 'submitted'))
			UNION ALL
			SELECT t.capsule, t.id, coalesce(t.runner, '') FROM capsulegate_push p JOIN capsulegate_tasks t ON t.capsule = p.capsule AND t.id = p.task_id
			WHERE p.delivered <> -1 AND t.done AND (t.runner IS NULL OR (t.runner <> $1
			  AND NOT EXISTS (SELECT 1 FROM capsulegate_instances i WHERE i.name = t.runner AND i.seen + i.lease > `+sqlNow+`)))
			LIMIT 1000`, []any{f.name}, scanSignal(taskstore.SignalOrphan))
		if err != nil {
			continue
		}
		for _, sig := range got {
			f.dispatch(sig)
		}
	}
}

// scanSignal reads (capsule, task, arg) rows as signals of kind.
func scanSignal(kind taskstore.SignalKind) func(pgx.CollectableRow) (taskstore.Signal, error) {
	return func(r pgx.CollectableRow) (taskstore.Signal, error) {
		sig := taskstore.Signal{Kind: kind}
		err := r.Scan(&sig.Capsule, &sig.TaskID, &sig.Arg)
		return sig, err
	}
}

// listenLoop holds the LISTEN session and hands each signal to the capsule's watchers;
// after a lost session every watcher gets SignalResync.
func (s *Store) listenLoop(conn *pgx.Conn) {
	f := s.fleet
	defer f.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.stop
		cancel()
	}()
	lost := false
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			if conn, err = s.listen(ctx); err != nil {
				lost = true
				select {
				case <-ctx.Done():
				case <-time.After(probeEvery):
				}
				continue
			}
		}
		f.listening.Store(true)
		if lost {
			f.dispatchAll(taskstore.SignalResync)
			lost = false
		}
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				break
			}
			if sig, ok := parseSignal(n.Payload); ok {
				f.dispatch(sig)
			}
		}
		f.listening.Store(false)
		lost = true
		closeCtx, done := s.timeout()
		_ = conn.Close(closeCtx)
		done()
		conn = nil
	}
}

// listen opens the session signals arrive on.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// Watch calls fn for every signal about capsule's tasks until stop.
func (s *Store) Watch(capsule string, fn func(taskstore.Signal)) (stop func()) {
	f := s.fleet
	if f == nil {
		return func() {}
	}
	f.watchMu.Lock()
	id := f.nextWID
	f.nextWID++
	ws := f.watchers[capsule]
	first := ws == nil
	if first {
		ws = map[int]func(taskstore.Signal){}
		f.watchers[capsule] = ws
	}
	ws[id] = fn
	f.watchMu.Unlock()
	if first && f.predecessor {
		// A replica of this name died: its unfinished tasks carry this name as runner and
		// would look alive; they are reported as orphans now.
		go func() {
			got, err := query(s, `SELECT t.capsule, t.id, t.runner FROM capsulegate_tasks t
				WHERE t.capsule = $1 AND t.runner = $2 AND (NOT t.done OR EXISTS
				  (SELECT 1 FROM capsulegate_push p WHERE p.capsule = t.capsule AND p.task_id = t.id AND p.delivered <> -1))`,
				[]any{capsule, f.name}, scanSignal(taskstore.SignalOrphan))
			if err == nil {
				for _, sig := range got {
					fn(sig)
				}
			}
		}()
	}
	return func() {
		f.watchMu.Lock()
		defer f.watchMu.Unlock()
		delete(f.watchers[capsule], id)
		if len(f.watchers[capsule]) == 0 {
			delete(f.watchers, capsule)
		}
	}
}

func (f *fleet) hasWatchers() bool {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	return len(f.watchers) > 0
}

func (f *fleet) dispatch(sig taskstore.Signal) {
	f.watchMu.Lock()
	fns := make([]func(taskstore.Signal), 0, len(f.watchers[sig.Capsule]))
	for _, fn := range f.watchers[sig.Capsule] {
		fns = append(fns, fn)
	}
	f.watchMu.Unlock()
	for _, fn := range fns {
		fn(sig)
	}
}

func (f *fleet) dispatchAll(kind taskstore.SignalKind) {
	f.watchMu.Lock()
	var fns []func(taskstore.Signal)
	var caps []string
	for c, ws := range f.watchers {
		for _, fn := range ws {
			fns, caps = append(fns, fn), append(caps, c)
		}
	}
	f.watchMu.Unlock()
	for i, fn := range fns {
		fn(taskstore.Signal{Kind: kind, Capsule: caps[i]})
	}
}

// A signal's payload: kind, capsule, task id and argument, separated by the unit
// separator, which no id holds (taskstore.CheckID refuses control characters in ids the
// A2A layer accepts).
const sep = "\x1f"

func signalPayload(sig taskstore.Signal) string {
	return string(sig.Kind) + sep + sig.Capsule + sep + sig.TaskID + sep + sig.Arg
}

func parseSignal(p string) (taskstore.Signal, bool) {
	f := strings.SplitN(p, sep, 4)
	if len(f) != 4 || len(f[0]) != 1 {
		return taskstore.Signal{}, false
	}
	return taskstore.Signal{Kind: taskstore.SignalKind(f[0][0]), Capsule: f[1], TaskID: f[2], Arg: f[3]}, true
}

// Signal tells every replica, this one too, sig.
func (s *Store) Signal(sig taskstore.Signal) error {
	ctx, cancel := s.timeout()
	defer cancel()
	start := time.Now()
	_, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, signalPayload(sig))
	s.stats.roundTrip(time.Since(start), err)
	if err != nil && isConnErr(err) {
		return s.failed(err)
	}
	return err
}

// taskCols are the columns a claim or an adoption returns, scanned by scanFleetTask.
const taskCols = `t.capsule, t.id, t.context_id, t.owner, t.state, t.since, t.updated, t.done, t.data, t.digest, t.mark`

func scanFleetTask(r pgx.CollectableRow) (taskstore.Task, error) {
	var t taskstore.Task
	var since, updated int64
	err := r.Scan(&t.Capsule, &t.ID, &t.ContextID, &t.Owner, &t.State, &since, &updated, &t.Done, &t.Data, &t.Digest, &t.Mark)
	t.Since, t.Updated = fromNanos(since), fromNanos(updated)
	return t, err
}

// Claim makes this replica the runner of up to n queued tasks of capsule, oldest first,
// in their contexts' order, by the version rule, and says whether queued tasks are left
// (taskstore.Fleet).
func (s *Store) Claim(capsule, digest string, versions taskstore.Versions, n int) ([]taskstore.Claimed, bool, error) {
	if s.fleet == nil || n <= 0 {
		return nil, false, nil
	}
	// One row at least: whether queued tasks are left, beside each task claimed (none:
	// its columns NULL).
	got, err := query(s, `WITH c AS (
		  SELECT t.capsule, t.id FROM capsulegate_tasks t
		  WHERE t.capsule = $1 AND t.runner IS NULL AND NOT t.done AND t.state = 'submitted'
		    AND ($3 = 2 OR t.digest = $2 OR ($3 = 0 AND NOT EXISTS (SELECT 1 FROM capsulegate_instances i
		      WHERE i.seen + i.lease > `+sqlNow+` AND (t.capsule || '@' || t.digest) = ANY (i.serves))))
		    AND NOT EXISTS (SELECT 1 FROM capsulegate_tasks e WHERE e.capsule = t.capsule AND e.owner = t.owner
		      AND e.context_id = t.context_id AND NOT e.done AND e.admitted < t.admitted)
		  ORDER BY t.admitted LIMIT $4
		  FOR UPDATE OF t SKIP LOCKED),
		u AS (UPDATE capsulegate_tasks t SET runner = $5 FROM c WHERE t.capsule = c.capsule AND t.id = c.id
		  RETURNING t.admitted, `+taskCols+`,
		  coalesce((SELECT p.mark || `+"'\x1f'"+` || coalesce(p.runner, '') FROM capsulegate_tasks p WHERE p.capsule = t.capsule AND p.owner = t.owner
		    AND p.context_id = t.context_id AND p.done AND p.mark <> '' AND p.admitted < t.admitted ORDER BY p.admitted DESC LIMIT 1), '') AS prev,
		  EXISTS (SELECT 1 FROM capsulegate_push p WHERE p.capsule = t.capsule AND p.task_id = t.id) AS pushes),
		m AS (SELECT EXISTS (SELECT 1 FROM capsulegate_tasks q WHERE q.capsule = $1 AND q.runner IS NULL AND NOT q.done
		  AND q.state = 'submitted' AND q.id NOT IN (SELECT id FROM c)) AS more)
		SELECT m.more, u.* FROM m LEFT JOIN u ON true`,
		[]any{capsule, digest, int(versions), n, s.fleet.name}, func(r pgx.CollectableRow) (claimed, error) {
			var c claimed
			var admitted, since, updated *int64
			var cap, id, ctx, owner, state, dg, mark, prev *string
			var done, pushes *bool
			err := r.Scan(&c.more, &admitted, &cap, &id, &ctx, &owner, &state, &since, &updated, &done, &c.Data, &dg, &mark, &prev, &pushes)
			if err != nil || id == nil {
				return c, err
			}
			c.got, c.admitted = true, *admitted
			c.Capsule, c.ID, c.ContextID, c.Owner, c.State, c.Digest, c.Mark = *cap, *id, *ctx, *owner, *state, *dg, *mark
			c.Since, c.Updated, c.Done, c.Pushes = fromNanos(*since), fromNanos(*updated), *done, *pushes
			c.PrevMark, c.PrevRunner, _ = strings.Cut(*prev, sep)
			return c, nil
		})
	if err != nil {
		return nil, false, err
	}
	more := len(got) > 0 && got[0].more
	got = slices.DeleteFunc(got, func(c claimed) bool { return !c.got })
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Compare(a.admitted, b.admitted) })
	out := make([]taskstore.Claimed, len(got))
	for i, c := range got {
		out[i] = c.Claimed
	}
	return out, more, nil
}

type claimed struct {
	taskstore.Claimed
	admitted  int64
	got, more bool
}

// ClaimTask makes this replica the runner of the queued task id, whatever its
// context's order.
func (s *Store) ClaimTask(capsule, id string) (taskstore.Task, bool, error) {
	if s.fleet == nil {
		return taskstore.Task{}, false, nil
	}
	return s.takeTask(`UPDATE capsulegate_tasks t SET runner = $3 WHERE t.capsule = $1 AND t.id = $2
		AND t.runner IS NULL AND NOT t.done AND t.state = 'submitted' RETURNING `+taskCols, capsule, id, s.fleet.name)
}

// Adopt makes this replica the runner of task id in place of from ("": a task a gateway
// before the fleet left without a runner).
func (s *Store) Adopt(capsule, id, from string) (taskstore.Task, bool, error) {
	if s.fleet == nil {
		return taskstore.Task{}, false, nil
	}
	return s.takeTask(`UPDATE capsulegate_tasks t SET runner = $3 WHERE t.capsule = $1 AND t.id = $2
		AND t.runner IS NOT DISTINCT FROM NULLIF($4, '') RETURNING `+taskCols, capsule, id, s.fleet.name, from)
}

func (s *Store) takeTask(sql string, args ...any) (taskstore.Task, bool, error) {
	got, err := query(s, sql, args, scanFleetTask)
	if err != nil || len(got) == 0 {
		return taskstore.Task{}, false, err
	}
	return got[0], true, nil
}

// Requeue gives the task from claimed but never started back to the queue.
func (s *Store) Requeue(capsule, id, from string) (bool, error) {
	if s.fleet == nil {
		return false, nil
	}
	got, err := query(s, `UPDATE capsulegate_tasks SET runner = NULL WHERE capsule = $1 AND id = $2 AND runner = $3
		AND state = 'submitted' AND NOT done RETURNING 1`, []any{capsule, id, from}, pgx.RowTo[int])
	if from == "" {
		return false, err // queued already
	}
	return len(got) > 0, err
}

// Open returns the unfinished tasks of the context (owner, contextID), oldest first.
func (s *Store) Open(capsule, owner, contextID string) ([]taskstore.Running, error) {
	return query(s, `SELECT id, state, coalesce(runner, '') FROM capsulegate_tasks
		WHERE capsule = $1 AND owner = $2 AND context_id = $3 AND NOT done ORDER BY admitted`,
		[]any{capsule, owner, contextID}, func(r pgx.CollectableRow) (taskstore.Running, error) {
			var t taskstore.Running
			err := r.Scan(&t.ID, &t.State, &t.Runner)
			return t, err
		})
}

// Runner returns the replica that runs task id ("" while queued or done).
func (s *Store) Runner(capsule, id string) (string, error) {
	got, err := query(s, `SELECT coalesce(runner, '') FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND NOT done`,
		[]any{capsule, id}, pgx.RowTo[string])
	if err != nil || len(got) == 0 {
		return "", err
	}
	return got[0], nil
}

var _ taskstore.Fleet = (*Store)(nil)
