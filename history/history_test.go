package history_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/history/historytest"
	"github.com/drover-sched/drover/testkit/mariadbtest"
	"github.com/drover-sched/drover/testkit/testlog"
)

// mariadb is the real MariaDB the MySQL store's tests run against,
// started once for the package.
var mariadb *mariadbtest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "history-mariadb-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mariadb, err = mariadbtest.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start MariaDB:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	mariadb.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

var databases atomic.Int64

// newDatabase makes an empty database on the test MariaDB.
func newDatabase(t testing.TB) string {
	dsn, err := mariadb.CreateDatabase(fmt.Sprintf("history_%d", databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func TestEmbeddedConformance(t *testing.T) {
	historytest.Run(t, func(t *testing.T) history.Store {
		s, err := history.OpenEmbedded(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMySQLConformance(t *testing.T) {
	historytest.Run(t, func(t *testing.T) history.Store {
		s, err := history.OpenMySQL(context.Background(), newDatabase(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestMySQLDriverLogsToSlog: what go-sql-driver/mysql logs goes to the
// server's structured log. A connection the server killed while it sat
// in the pool is what the driver reports when it next takes it.
func TestMySQLDriverLogsToSlog(t *testing.T) {
	var buf testlog.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	dsn := newDatabase(t)
	s, err := history.OpenMySQL(context.Background(), dsn, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// Kill every connection of the store's but this one.
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) == 0 {
		t.Fatal("the store holds no connection")
	}
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Ping(ctx) // the killed connection fails; the driver says why
	_ = s.Ping(ctx)
	out := buf.String()
	if !strings.Contains(out, `"msg":"mysql driver: `) || !strings.Contains(out, `"component":"history"`) {
		t.Fatalf("the driver's log did not reach slog: %q", out)
	}
}
