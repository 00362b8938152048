package mariadbtest

import (
	"database/sql"
	"testing"
)

// TestMariaDB starts a real mariadbd, writes and reads a row, survives a
// kill -9 and a restart with the row intact.
func TestMariaDB(t *testing.T) {
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	dsn, err := s.CreateDatabase("drover_test")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1, 'kept')"); err != nil {
		t.Fatal(err)
	}
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("MariaDB %s", version)
	s.Kill()
	if err := db.Ping(); err == nil {
		t.Fatal("a killed mariadbd answered")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "kept" {
		t.Fatalf("after a kill and a restart: %q, %v", v, err)
	}
}
