package history_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/history/historytest"
	"github.com/drover-sched/drover/internal/mariadbtest"
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
		s, err := history.OpenMySQL(context.Background(), newDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
