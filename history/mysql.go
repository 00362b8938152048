package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/drover-sched/drover/api"
)

// MySQL is the history store of a production cluster: a MySQL (or
// MariaDB) database that every server reaches.
type MySQL struct {
	db *sql.DB

	// ping is a connection of its own for Ping, so the health checks
	// that go on while nothing else does keep no pooled connection (and
	// the buffers a large export left it) from closing once idle.
	pingMu sync.Mutex
	ping   *sql.Conn
}

// migrations are the schema, one step per version, applied in order by
// OpenMySQL and recorded in schema_migrations. A released step never
// changes: a new one is added.
var migrations = []string{
	1: `CREATE TABLE batches (
		id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		version BIGINT UNSIGNED NOT NULL,
		billing_project VARCHAR(255) NOT NULL,
		owner VARCHAR(255) NOT NULL,
		name VARCHAR(255) NOT NULL,
		complete BOOL NOT NULL,
		cancelled BOOL NOT NULL,
		all_succeeded BOOL NOT NULL,
		any_bad BOOL NOT NULL,
		doc MEDIUMBLOB NOT NULL,
		KEY by_project (billing_project, id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	2: `CREATE TABLE job_groups (
		batch_id BIGINT UNSIGNED NOT NULL,
		first_job INT UNSIGNED NOT NULL,
		doc MEDIUMBLOB NOT NULL,
		PRIMARY KEY (batch_id, first_job)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	3: `CREATE TABLE jobs (
		batch_id BIGINT UNSIGNED NOT NULL,
		job_id INT UNSIGNED NOT NULL,
		state VARCHAR(16) NOT NULL,
		doc MEDIUMBLOB NOT NULL,
		PRIMARY KEY (batch_id, job_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	4: `CREATE TABLE ledger (
		billing_project VARCHAR(255) NOT NULL,
		day INT NOT NULL,
		batch_id BIGINT UNSIGNED NOT NULL,
		owner VARCHAR(255) NOT NULL,
		cost DOUBLE NOT NULL,
		PRIMARY KEY (billing_project, day, batch_id, owner),
		KEY by_batch (batch_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	// Money in integers: a cost is exact to the nano-dollar (what
	// money.Amount holds; 11 digits of dollars hold its largest). The
	// DOUBLEs of a database written before are rounded once, by MariaDB,
	// to the nearest nano-dollar.
	5: `ALTER TABLE ledger MODIFY cost DECIMAL(20,9) NOT NULL`,
	// What each queue held, minute by minute (queue paths are at most
	// 8 x 65 bytes).
	6: `CREATE TABLE queue_usage (
		queue VARCHAR(520) NOT NULL,
		at BIGINT NOT NULL,
		seconds BIGINT NOT NULL,
		cpu_milli BIGINT NOT NULL,
		memory BIGINT NOT NULL,
		jobs BIGINT NOT NULL,
		PRIMARY KEY (queue, at),
		KEY by_time (at)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	// The timeline each batch was exported from (a restore starts a new
	// one), and the store's identity, made once.
	7: `ALTER TABLE batches ADD COLUMN timeline BIGINT UNSIGNED NOT NULL DEFAULT 0`,
	8: `CREATE TABLE store_meta (
		name VARCHAR(64) NOT NULL PRIMARY KEY,
		value VARCHAR(255) NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	9: `INSERT INTO store_meta (name, value) VALUES ('identity', UUID())`,
	// What each group of jobs of a batch asked for and used on each day
	// (efficiency.Summary as JSON), for reports over a period.
	10: `CREATE TABLE efficiency (
		batch_id BIGINT UNSIGNED NOT NULL,
		seq INT UNSIGNED NOT NULL,
		billing_project VARCHAR(255) NOT NULL,
		day INT NOT NULL,
		owner VARCHAR(255) NOT NULL,
		doc MEDIUMBLOB NOT NULL,
		PRIMARY KEY (batch_id, seq),
		KEY by_project (billing_project, day, batch_id, seq),
		KEY by_owner (owner, day, batch_id, seq)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	// Each complete batch that named an SLO or a deadline, as the SLO
	// report counts it (SLORun), by completion time.
	11: `CREATE TABLE slo_runs (
		batch_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		billing_project VARCHAR(255) NOT NULL,
		workflow VARCHAR(1024) NOT NULL,
		queue VARCHAR(520) NOT NULL,
		completed BIGINT NOT NULL,
		met BOOL NOT NULL,
		cancelled BOOL NOT NULL,
		KEY by_time (completed, batch_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	// Queue samples of one cluster, and each cluster's capacity (queue
	// ''), beside those of queues in all clusters (cluster '').
	12: `ALTER TABLE queue_usage ADD COLUMN cluster VARCHAR(64) NOT NULL DEFAULT '', DROP PRIMARY KEY, ADD PRIMARY KEY (queue, cluster, at)`,
}

// SchemaVersion is the schema this binary needs.
var SchemaVersion = len(migrations) - 1

// rowsPerInsert bounds the rows of one INSERT (a job row has four
// placeholders; MySQL allows 65,535 a statement).
const rowsPerInsert = 1000

// driverLogger hands what go-sql-driver/mysql logs (a connection that
// broke, a packet cut short) to the server's structured log instead of
// its own unstructured lines on stderr.
type driverLogger struct{ log *slog.Logger }

func (d driverLogger) Print(v ...any) {
	d.log.Warn("mysql driver: "+strings.TrimSpace(fmt.Sprint(v...)), "component", "history")
}

// ConnMaxIdleTime is how long a MySQL connection may sit idle before it is
// closed, with the buffers it holds. database/sql looks for such
// connections every ConnMaxIdleTime, so one goes within twice that.
const ConnMaxIdleTime = 15 * time.Second

// OpenMySQL connects to the database a DSN names
// (user:password@tcp(host:3306)/drover, go-sql-driver/mysql's form) and
// brings its schema up to date. Several servers may open it at once: a
// named lock lets one migrate at a time. What the driver logs goes to log
// (nil: the driver's own logger, on stderr).
func OpenMySQL(ctx context.Context, dsn string, log *slog.Logger) (*MySQL, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("history: MySQL DSN: %w", err)
	}
	if log != nil {
		cfg.Logger = driverLogger{log}
	}
	if cfg.DBName == "" {
		return nil, errors.New("history: the MySQL DSN names no database (user:password@tcp(host:3306)/DATABASE)")
	}
	// One round trip a statement, not prepare, execute and close.
	cfg.InterpolateParams = true
	cfg.ParseTime = false
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = time.Minute
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = time.Minute
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("history: MySQL: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(10 * time.Minute)
	// Each connection keeps a buffer as large as the largest packet it
	// carried (up to 256 KiB): close those the exporter and readers have
	// left idle.
	db.SetConnMaxIdleTime(ConnMaxIdleTime)
	m := &MySQL{db: db}
	if err := m.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := m.backfillSLO(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return m, nil
}

// backfillSLO writes the SLO runs of the batches stored before the store
// kept them, once (store_meta's slo_runs_backfilled says it was done). A
// run stored already is not overwritten: an export racing the backfill
// wrote a newer one.
func (m *MySQL) backfillSLO(ctx context.Context) error {
	var done int
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM store_meta WHERE name = 'slo_runs_backfilled'").Scan(&done); err != nil {
		return fmt.Errorf("history: read store_meta: %w", err)
	}
	if done > 0 {
		return nil
	}
	for after := uint64(0); ; {
		rows, err := m.db.QueryContext(ctx, "SELECT id, doc FROM batches WHERE complete AND id > ? ORDER BY id LIMIT ?", after, batchChunk)
		if err != nil {
			return fmt.Errorf("history: backfill SLO runs: %w", err)
		}
		var runs []SLORun
		n := 0
		for rows.Next() {
			var doc []byte
			if err := rows.Scan(&after, &doc); err != nil {
				rows.Close()
				return fmt.Errorf("history: backfill SLO runs: %w", err)
			}
			n++
			var b Batch
			if err := json.Unmarshal(doc, &b); err != nil {
				rows.Close()
				return fmt.Errorf("history: backfill SLO runs: batch %d: %w", after, err)
			}
			if r, ok := SLORunOf(&b.Batch); ok {
				runs = append(runs, r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("history: backfill SLO runs: %w", err)
		}
		if len(runs) > 0 {
			if err := m.insertRows(ctx, "INSERT IGNORE INTO slo_runs (batch_id, billing_project, workflow, queue, completed, met, cancelled) VALUES ", "(?,?,?,?,?,?,?)", "",
				len(runs), func(i int) []any { return sloArgs(&runs[i]) }); err != nil {
				return fmt.Errorf("history: backfill SLO runs: %w", err)
			}
		}
		if n < batchChunk {
			break
		}
	}
	if _, err := m.db.ExecContext(ctx, "INSERT IGNORE INTO store_meta (name, value) VALUES ('slo_runs_backfilled', '1')"); err != nil {
		return fmt.Errorf("history: record the SLO backfill: %w", err)
	}
	return nil
}

func sloArgs(r *SLORun) []any {
	return []any{r.Batch, r.Project, r.Workflow, r.Queue, r.Completed, r.Met, r.Cancelled}
}

// sloPage is how many runs one query of SLORuns reads.
const sloPage = 5000

// SLORuns implements Store.
func (m *MySQL) SLORuns(ctx context.Context, q SLOQuery, limit int) ([]SLORun, bool, error) {
	out := []SLORun{}
	completed, batch := q.From, uint64(0) // at or after (completed, batch)
	for {
		rows, err := m.db.QueryContext(ctx, `SELECT batch_id, billing_project, workflow, queue, completed, met, cancelled FROM slo_runs
			WHERE completed < ? AND (completed, batch_id) >= (?, ?) ORDER BY completed, batch_id LIMIT ?`, q.To, completed, batch, sloPage)
		if err != nil {
			return nil, false, fmt.Errorf("history: SLO runs: %w", err)
		}
		n, more, err := sloRows(rows, q, limit, &out, &completed, &batch)
		if err != nil || more || n < sloPage {
			return out, more, err
		}
		batch++
	}
}

// sloRows reads one page of SLORuns into out, up to limit, and says where
// it ended.
func sloRows(rows *sql.Rows, q SLOQuery, limit int, out *[]SLORun, completed *int64, batch *uint64) (int, bool, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var r SLORun
		if err := rows.Scan(&r.Batch, &r.Project, &r.Workflow, &r.Queue, &r.Completed, &r.Met, &r.Cancelled); err != nil {
			return n, false, fmt.Errorf("history: SLO runs: %w", err)
		}
		n++
		*completed, *batch = r.Completed, r.Batch
		if q.Hide != nil && q.Hide(r.Batch) {
			continue
		}
		if len(*out) == limit {
			return n, true, nil
		}
		*out = append(*out, r)
	}
	if err := rows.Err(); err != nil {
		return n, false, fmt.Errorf("history: SLO runs: %w", err)
	}
	return n, false, nil
}

// migrate applies the steps the database lacks.
func (m *MySQL) migrate(ctx context.Context) error {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("history: connect to MySQL: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('drover_history_migrate', 60)").Scan(&got); err != nil || got.Int64 != 1 {
		return fmt.Errorf("history: take the migration lock: %v (another server migrating for over a minute?)", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('drover_history_migrate')") //nolint:errcheck
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE=InnoDB`); err != nil {
		return fmt.Errorf("history: create schema_migrations: %w", err)
	}
	var have int
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("history: read the schema version: %w", err)
	}
	if have > SchemaVersion {
		return fmt.Errorf("history: the database's schema is version %d, newer than this drover's %d: upgrade drover", have, SchemaVersion)
	}
	for v := have + 1; v <= SchemaVersion; v++ {
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("history: schema step %d: %w", v, err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", v, time.Now().Unix()); err != nil {
			return fmt.Errorf("history: record schema step %d: %w", v, err)
		}
	}
	return nil
}

// Kind implements Store.
func (m *MySQL) Kind() string { return "mysql" }

// DB is the connection pool (tests and benchmarks look inside).
func (m *MySQL) DB() *sql.DB { return m.db }

// Stored implements Store.
func (m *MySQL) Stored(ctx context.Context, batch uint64) (Stored, error) {
	var st Stored
	err := m.db.QueryRowContext(ctx, "SELECT version, timeline FROM batches WHERE id = ?", batch).Scan(&st.Version, &st.Timeline)
	if errors.Is(err, sql.ErrNoRows) {
		return Stored{}, nil
	}
	if err != nil {
		return Stored{}, fmt.Errorf("history: version of batch %d: %w", batch, err)
	}
	return st, nil
}

// discardChunk is how many job rows one statement of a discard deletes.
const discardChunk = 5000

// Discard implements Store.
func (m *MySQL) Discard(ctx context.Context, batch uint64) error {
	for _, table := range []string{"jobs", "job_groups"} {
		for {
			res, err := m.db.ExecContext(ctx, "DELETE FROM "+table+" WHERE batch_id = ? LIMIT ?", batch, discardChunk)
			if err != nil {
				return fmt.Errorf("history: discard batch %d: %w", batch, err)
			}
			if n, _ := res.RowsAffected(); n < discardChunk {
				break
			}
		}
	}
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("history: discard batch %d: %w", batch, err)
	}
	defer tx.Rollback() //nolint:errcheck
	for _, q := range []string{"DELETE FROM ledger WHERE batch_id = ?", "DELETE FROM efficiency WHERE batch_id = ?", "DELETE FROM slo_runs WHERE batch_id = ?",
		"DELETE FROM batches WHERE id = ?"} {
		if _, err := tx.ExecContext(ctx, q, batch); err != nil {
			return fmt.Errorf("history: discard batch %d: %w", batch, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("history: discard batch %d: %w", batch, err)
	}
	return nil
}

// MaxBatch implements Store.
func (m *MySQL) MaxBatch(ctx context.Context) (uint64, error) {
	var id uint64
	if err := m.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM batches").Scan(&id); err != nil {
		return 0, fmt.Errorf("history: highest batch ID: %w", err)
	}
	return id, nil
}

// Identity implements Store.
func (m *MySQL) Identity(ctx context.Context) (string, error) {
	var id string
	if err := m.db.QueryRowContext(ctx, "SELECT value FROM store_meta WHERE name = 'identity'").Scan(&id); err != nil {
		return "", fmt.Errorf("history: the store's identity: %w", err)
	}
	return id, nil
}

// insertRows writes rows in statements of at most rowsPerInsert, in one
// transaction.
func (m *MySQL) insertRows(ctx context.Context, head, row, tail string, n int, args func(i int) []any) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	var q strings.Builder
	for lo := 0; lo < n; lo += rowsPerInsert {
		hi := min(lo+rowsPerInsert, n)
		q.Reset()
		q.WriteString(head)
		var all []any
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			q.WriteString(row)
			all = append(all, args(i)...)
		}
		q.WriteString(tail)
		if _, err := tx.ExecContext(ctx, q.String(), all...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// marshalEach encodes each of xs as JSON.
func marshalEach[T any](xs []T) ([][]byte, error) {
	docs := make([][]byte, len(xs))
	for i := range xs {
		var err error
		if docs[i], err = json.Marshal(&xs[i]); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// PutGroups implements Store.
func (m *MySQL) PutGroups(ctx context.Context, batch uint64, groups []Group) error {
	docs, err := marshalEach(groups)
	if err != nil {
		return err
	}
	err = m.insertRows(ctx, "INSERT INTO job_groups (batch_id, first_job, doc) VALUES ", "(?,?,?)",
		" ON DUPLICATE KEY UPDATE doc = VALUES(doc)", len(groups), func(i int) []any {
			return []any{batch, groups[i].First, docs[i]}
		})
	if err != nil {
		return fmt.Errorf("history: store job groups of batch %d: %w", batch, err)
	}
	return nil
}

// PutJobs implements Store.
func (m *MySQL) PutJobs(ctx context.Context, batch uint64, jobs []Job) error {
	docs, err := marshalEach(jobs)
	if err != nil {
		return err
	}
	err = m.insertRows(ctx, "INSERT INTO jobs (batch_id, job_id, state, doc) VALUES ", "(?,?,?,?)",
		" ON DUPLICATE KEY UPDATE state = VALUES(state), doc = VALUES(doc)", len(jobs), func(i int) []any {
			return []any{batch, jobs[i].ID, jobs[i].State, docs[i]}
		})
	if err != nil {
		return fmt.Errorf("history: store jobs of batch %d: %w", batch, err)
	}
	return nil
}

// PutBatch implements Store.
func (m *MySQL) PutBatch(ctx context.Context, b Batch, ledger []LedgerRow, eff []EfficiencyRow) (bool, error) {
	doc, err := json.Marshal(&b)
	if err != nil {
		return false, err
	}
	for i := range eff {
		eff[i].Batch = uint64(b.ID)
	}
	effDocs, err := marshalEach(eff)
	if err != nil {
		return false, err
	}
	written, err := m.putBatch(ctx, &b, doc, ledger, eff, effDocs)
	if err != nil {
		return false, fmt.Errorf("history: store batch %d: %w", b.ID, err)
	}
	return written, nil
}

func (m *MySQL) putBatch(ctx context.Context, b *Batch, doc []byte, ledger []LedgerRow, eff []EfficiencyRow, effDocs [][]byte) (bool, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck
	var have Stored
	switch err := tx.QueryRowContext(ctx, "SELECT version, timeline FROM batches WHERE id = ? FOR UPDATE", b.ID).Scan(&have.Version, &have.Timeline); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, err
	case have.Timeline == b.Timeline && have.Version >= b.Version:
		return false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO batches (id, version, timeline, billing_project, owner, name, complete, cancelled, all_succeeded, any_bad, doc)
		VALUES (?,?,?,?,?,?,?,?,?,?,?) ON DUPLICATE KEY UPDATE version = VALUES(version), timeline = VALUES(timeline), billing_project = VALUES(billing_project),
		owner = VALUES(owner), name = VALUES(name), complete = VALUES(complete), cancelled = VALUES(cancelled),
		all_succeeded = VALUES(all_succeeded), any_bad = VALUES(any_bad), doc = VALUES(doc)`,
		b.ID, b.Version, b.Timeline, b.BillingProject, b.User, b.Name, b.State == api.BatchComplete, b.Cancelled,
		b.NSucceeded == b.NJobs, b.NFailed+b.NError > 0, doc)
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM ledger WHERE batch_id = ?", b.ID); err != nil {
		return false, err
	}
	for lo := 0; lo < len(ledger); lo += rowsPerInsert {
		hi := min(lo+rowsPerInsert, len(ledger))
		q := "INSERT INTO ledger (billing_project, day, batch_id, owner, cost) VALUES " + strings.Repeat("(?,?,?,?,?),", hi-lo-1) + "(?,?,?,?,?)"
		var args []any
		for _, r := range ledger[lo:hi] {
			args = append(args, r.BillingProject, r.Day, r.Batch, r.User, r.Cost)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM efficiency WHERE batch_id = ?", b.ID); err != nil {
		return false, err
	}
	for lo := 0; lo < len(eff); lo += rowsPerInsert {
		hi := min(lo+rowsPerInsert, len(eff))
		q := "INSERT INTO efficiency (batch_id, seq, billing_project, day, owner, doc) VALUES " + strings.Repeat("(?,?,?,?,?,?),", hi-lo-1) + "(?,?,?,?,?,?)"
		var args []any
		for i := lo; i < hi; i++ {
			r := &eff[i]
			args = append(args, b.ID, i, r.BillingProject, r.Day, r.User, effDocs[i])
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM slo_runs WHERE batch_id = ?", b.ID); err != nil {
		return false, err
	}
	if r, ok := SLORunOf(&b.Batch); ok {
		if _, err := tx.ExecContext(ctx, "INSERT INTO slo_runs (batch_id, billing_project, workflow, queue, completed, met, cancelled) VALUES (?,?,?,?,?,?,?)", sloArgs(&r)...); err != nil {
			return false, err
		}
	}
	return true, tx.Commit()
}

// Batch implements Store.
func (m *MySQL) Batch(ctx context.Context, id uint64) (Batch, bool, error) {
	var doc []byte
	err := m.db.QueryRowContext(ctx, "SELECT doc FROM batches WHERE id = ?", id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, false, nil
	}
	var b Batch
	if err == nil {
		err = json.Unmarshal(doc, &b)
	}
	if err != nil {
		return Batch{}, false, fmt.Errorf("history: batch %d: %w", id, err)
	}
	return b, true, nil
}

// batchChunk is how many rows one query of a listing reads.
const batchChunk = 200

// ListBatches implements Store.
func (m *MySQL) ListBatches(ctx context.Context, q api.BatchQuery, projects []string, lastID uint64) (api.BatchList, error) {
	out := api.BatchList{Batches: []api.Batch{}}
	if projects != nil && len(projects) == 0 {
		return out, nil
	}
	var where []string
	var args []any
	if projects != nil {
		where = append(where, "billing_project IN (?"+strings.Repeat(",?", len(projects)-1)+")")
		for _, p := range projects {
			args = append(args, p)
		}
	}
	for _, t := range q {
		switch {
		case t.Key == "billing_project":
			where, args = append(where, "billing_project = ?"), append(args, t.Value)
		case t.Key == "user":
			where, args = append(where, "owner = ?"), append(args, t.Value)
		case t.Key == "name":
			where, args = append(where, "name = ?"), append(args, t.Value)
		case t.Key == "state":
			where = append(where, map[string]string{
				"running": "NOT complete", "complete": "complete", "cancelled": "cancelled",
				"success": "complete AND all_succeeded", "failure": "any_bad",
			}[t.Value])
		}
	}
	cond := ""
	if len(where) > 0 {
		cond = " AND " + strings.Join(where, " AND ")
	}
	from := lastID
	if from == 0 {
		from = 1<<63 - 1
	}
	scanned := 0
	for {
		// One row more than a chunk: whether more follow.
		rows, err := m.db.QueryContext(ctx, "SELECT doc FROM batches WHERE id < ?"+cond+" ORDER BY id DESC LIMIT ?",
			append(append([]any{from}, args...), batchChunk+1)...)
		if err != nil {
			return api.BatchList{}, fmt.Errorf("history: list batches: %w", err)
		}
		var docs [][]byte
		for rows.Next() {
			var doc []byte
			if err := rows.Scan(&doc); err != nil {
				rows.Close()
				return api.BatchList{}, fmt.Errorf("history: list batches: %w", err)
			}
			docs = append(docs, doc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return api.BatchList{}, fmt.Errorf("history: list batches: %w", err)
		}
		more := len(docs) > batchChunk
		if more {
			docs = docs[:batchChunk]
		}
		for i, doc := range docs {
			var b Batch
			if err := json.Unmarshal(doc, &b); err != nil {
				return api.BatchList{}, fmt.Errorf("history: a batch below %d: %w", from, err)
			}
			scanned++
			from = uint64(b.ID)
			if q.Match(&b.Batch) {
				out.Batches = append(out.Batches, b.Batch)
			}
			if len(out.Batches) == PageSize || scanned == maxScan {
				if i < len(docs)-1 || more {
					out.LastID = b.ID
				}
				return out, nil
			}
		}
		if !more {
			return out, nil
		}
	}
}

// group reads the group holding job id.
func (m *MySQL) group(ctx context.Context, batch uint64, id uint32) (*Group, error) {
	var doc []byte
	err := m.db.QueryRowContext(ctx, "SELECT doc FROM job_groups WHERE batch_id = ? AND first_job <= ? ORDER BY first_job DESC LIMIT 1", batch, id).Scan(&doc)
	if err != nil {
		return nil, fmt.Errorf("group of job %d: %w", id, err)
	}
	var g Group
	if err := json.Unmarshal(doc, &g); err != nil {
		return nil, fmt.Errorf("group of job %d: %w", id, err)
	}
	if id < g.First || id >= g.First+g.Count {
		return nil, fmt.Errorf("job %d has no group", id)
	}
	return &g, nil
}

// ListJobs implements Store.
func (m *MySQL) ListJobs(ctx context.Context, batch uint64, q api.JobQuery, lastID uint32) (api.JobList, error) {
	out := api.JobList{Jobs: []api.Job{}}
	states := q.States()
	if states != nil && len(states) == 0 {
		return out, nil
	}
	cond := ""
	var sargs []any
	if states != nil {
		cond = " AND state IN (?" + strings.Repeat(",?", len(states)-1) + ")"
		for _, s := range states {
			sargs = append(sargs, s)
		}
	}
	chunk := PageSize
	if len(q) > 0 {
		chunk = batchChunk
	}
	var g *Group
	from, scanned := lastID, 0
	for {
		// One row more than a page: whether more follow.
		rows, err := m.db.QueryContext(ctx, "SELECT job_id, doc FROM jobs WHERE batch_id = ? AND job_id > ?"+cond+" ORDER BY job_id LIMIT ?",
			append(append([]any{batch, from}, sargs...), chunk+1)...)
		if err != nil {
			return api.JobList{}, fmt.Errorf("history: jobs of batch %d: %w", batch, err)
		}
		var got []Job
		for rows.Next() {
			var id uint32
			var doc []byte
			if err := rows.Scan(&id, &doc); err != nil {
				rows.Close()
				return api.JobList{}, fmt.Errorf("history: jobs of batch %d: %w", batch, err)
			}
			var j Job
			if err := json.Unmarshal(doc, &j); err != nil {
				rows.Close()
				return api.JobList{}, fmt.Errorf("history: job %d of batch %d: %w", id, batch, err)
			}
			got = append(got, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return api.JobList{}, fmt.Errorf("history: jobs of batch %d: %w", batch, err)
		}
		more := len(got) > chunk
		if more {
			got = got[:chunk]
		}
		for i := range got {
			j := &got[i]
			scanned++
			from = j.ID
			if g == nil || j.ID < g.First || j.ID >= g.First+g.Count {
				if g, err = m.group(ctx, batch, j.ID); err != nil {
					return api.JobList{}, fmt.Errorf("history: batch %d: %w", batch, err)
				}
			}
			if full := JobOf(batch, g, j); q.Match(&full, g.Job.Name) {
				out.Jobs = append(out.Jobs, full)
			}
			if len(out.Jobs) == PageSize || scanned == maxScan {
				if i < len(got)-1 || more {
					out.LastID = int64(j.ID)
				}
				return out, nil
			}
		}
		if !more {
			return out, nil
		}
	}
}

// Job implements Store.
func (m *MySQL) Job(ctx context.Context, batch uint64, id uint32) (api.Job, bool, error) {
	var doc []byte
	err := m.db.QueryRowContext(ctx, "SELECT doc FROM jobs WHERE batch_id = ? AND job_id = ?", batch, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return api.Job{}, false, nil
	}
	var j Job
	if err == nil {
		err = json.Unmarshal(doc, &j)
	}
	if err != nil {
		return api.Job{}, false, fmt.Errorf("history: job %d of batch %d: %w", id, batch, err)
	}
	g, err := m.group(ctx, batch, id)
	if err != nil {
		return api.Job{}, false, fmt.Errorf("history: batch %d: %w", batch, err)
	}
	return JobOf(batch, g, &j), true, nil
}

// Ledger implements Store.
func (m *MySQL) Ledger(ctx context.Context, project string, from, to int32) ([]LedgerRow, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT day, batch_id, owner, cost FROM ledger
		WHERE billing_project = ? AND day BETWEEN ? AND ? ORDER BY day, batch_id, owner`, project, from, to)
	if err != nil {
		return nil, fmt.Errorf("history: ledger of %s: %w", project, err)
	}
	defer rows.Close()
	out := []LedgerRow{}
	for rows.Next() {
		r := LedgerRow{BillingProject: project}
		if err := rows.Scan(&r.Day, &r.Batch, &r.User, &r.Cost); err != nil {
			return nil, fmt.Errorf("history: ledger of %s: %w", project, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: ledger of %s: %w", project, err)
	}
	return out, nil
}

// effPage is how many efficiency rows one query of a report reads.
const effPage = 5000

// Efficiency implements Store. It reads in pages, in index order, each
// from where the last ended, so rows Hide leaves out count against no
// limit.
func (m *MySQL) Efficiency(ctx context.Context, q EfficiencyQuery, limit int) ([]EfficiencyRow, bool, error) {
	var where string
	var args []any
	switch {
	case q.BillingProject != "" && q.User != "":
		where, args = "billing_project = ? AND owner = ?", []any{q.BillingProject, q.User}
	case q.BillingProject != "":
		where, args = "billing_project = ?", []any{q.BillingProject}
	default:
		where, args = "owner = ?", []any{q.User}
	}
	out := []EfficiencyRow{}
	day, batch, seq := int64(q.From), uint64(0), int64(-1) // after (day, batch, seq)
	for {
		rows, err := m.db.QueryContext(ctx, "SELECT day, batch_id, seq, doc FROM efficiency WHERE "+where+
			" AND day <= ? AND (day, batch_id, seq) > (?, ?, ?) ORDER BY day, batch_id, seq LIMIT ?",
			append(slices.Clone(args), q.To, day, batch, seq, effPage)...)
		if err != nil {
			return nil, false, fmt.Errorf("history: efficiency of %+v: %w", q, err)
		}
		n, more, err := m.effPage(rows, q, limit, &out, &day, &batch, &seq)
		if err != nil || more || n < effPage {
			return out, more, err
		}
	}
}

// effPage reads one page of Efficiency's rows into out, up to limit, and
// says where it ended.
func (m *MySQL) effPage(rows *sql.Rows, q EfficiencyQuery, limit int, out *[]EfficiencyRow, day *int64, batch *uint64, seq *int64) (int, bool, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(day, batch, seq, &doc); err != nil {
			return n, false, fmt.Errorf("history: efficiency of %+v: %w", q, err)
		}
		n++
		if q.Hide != nil && q.Hide(*batch) {
			continue
		}
		if len(*out) == limit {
			return n, true, nil
		}
		var r EfficiencyRow
		if err := json.Unmarshal(doc, &r); err != nil {
			return n, false, fmt.Errorf("history: efficiency of %+v: %w", q, err)
		}
		*out = append(*out, r)
	}
	if err := rows.Err(); err != nil {
		return n, false, fmt.Errorf("history: efficiency of %+v: %w", q, err)
	}
	return n, false, nil
}

// PutQueueUsage implements Store.
func (m *MySQL) PutQueueUsage(ctx context.Context, samples []QueueSample) error {
	err := m.insertRows(ctx, "INSERT INTO queue_usage (queue, cluster, at, seconds, cpu_milli, memory, jobs) VALUES ", "(?,?,?,?,?,?,?)",
		" ON DUPLICATE KEY UPDATE seconds = VALUES(seconds), cpu_milli = VALUES(cpu_milli), memory = VALUES(memory), jobs = VALUES(jobs)",
		len(samples), func(i int) []any {
			s := &samples[i]
			return []any{s.Queue, s.Cluster, s.At, s.Seconds, s.CPUMilli, s.Memory, s.Jobs}
		})
	if err != nil {
		return fmt.Errorf("history: store queue usage: %w", err)
	}
	return nil
}

// QueueUsage implements Store.
func (m *MySQL) QueueUsage(ctx context.Context, from, to int64) ([]QueueSample, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT queue, cluster, at, seconds, cpu_milli, memory, jobs FROM queue_usage
		WHERE at >= ? AND at < ? ORDER BY queue, cluster, at`, from, to)
	if err != nil {
		return nil, fmt.Errorf("history: queue usage: %w", err)
	}
	defer rows.Close()
	out := []QueueSample{}
	for rows.Next() {
		var s QueueSample
		if err := rows.Scan(&s.Queue, &s.Cluster, &s.At, &s.Seconds, &s.CPUMilli, &s.Memory, &s.Jobs); err != nil {
			return nil, fmt.Errorf("history: queue usage: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: queue usage: %w", err)
	}
	return out, nil
}

// PruneQueueUsage implements Store. Each chunk is one statement (its own
// transaction) that walks the by_time index; ordering by the primary
// key's columns too makes which rows a chunk deletes deterministic, so
// the statement is safe for statement-based replication.
func (m *MySQL) PruneQueueUsage(ctx context.Context, before int64) (int64, error) {
	var deleted int64
	for {
		res, err := m.db.ExecContext(ctx, "DELETE FROM queue_usage WHERE at < ? ORDER BY at, queue LIMIT ?", before, PruneChunk)
		if err != nil {
			return deleted, fmt.Errorf("history: prune queue usage: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return deleted, fmt.Errorf("history: prune queue usage: %w", err)
		}
		deleted += n
		if n < PruneChunk {
			return deleted, nil
		}
	}
}

// Ping implements Store.
func (m *MySQL) Ping(ctx context.Context) error {
	m.pingMu.Lock()
	defer m.pingMu.Unlock()
	if m.ping == nil {
		c, err := m.db.Conn(ctx)
		if err != nil {
			return err
		}
		m.ping = c
	}
	if err := m.ping.PingContext(ctx); err != nil {
		_ = m.ping.Close()
		m.ping = nil
		return err
	}
	return nil
}

// Close implements Store.
func (m *MySQL) Close() error {
	m.pingMu.Lock()
	if m.ping != nil {
		_ = m.ping.Close()
		m.ping = nil
	}
	m.pingMu.Unlock()
	return m.db.Close()
}
