// Package mariadbtest runs a real MariaDB server for tests: the system's
// mariadbd (Debian's mariadb-server, which `make test` installs when it is
// missing) on a data directory of its own, made by mariadb-install-db,
// listening on 127.0.0.1 on a free port. Never a mock.
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/drover-sched/drover/testkit/freeport"
)

// Server is a running mariadbd.
type Server struct {
	dir    string
	port   int
	socket string
	cmd    *exec.Cmd
	done   chan struct{}
	log    string
}

// Start makes a data directory under dir and starts mariadbd on it. Stop
// it with Stop.
func Start(dir string) (*Server, error) {
	installDB, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		return nil, errors.New("mariadb-install-db is not installed: `make test` installs mariadb-server (apt-get install mariadb-server)")
	}
	if _, err := mariadbd(); err != nil {
		return nil, err
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, port: port, socket: filepath.Join(dir, "mysqld.sock"), log: filepath.Join(dir, "mariadbd.log")}
	data := filepath.Join(dir, "data")
	out, err := exec.Command(installDB, "--no-defaults", "--datadir="+data, "--user="+u.Username,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, lastLines(string(out), 5))
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

func mariadbd() (string, error) {
	for _, p := range []string{"mariadbd", "/usr/sbin/mariadbd"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("mariadbd is not installed: `make test` installs mariadb-server (apt-get install mariadb-server)")
}

// Start starts mariadbd again on the same data directory (after Kill or
// Stop) and waits until it answers.
func (s *Server) Start() error {
	bin, err := mariadbd()
	if err != nil {
		return err
	}
	u, err := user.Current()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--no-defaults", "--datadir="+filepath.Join(s.dir, "data"), "--user="+u.Username,
		"--socket="+s.socket, "--bind-address=127.0.0.1", "--port="+strconv.Itoa(s.port), "--pid-file="+filepath.Join(s.dir, "mysqld.pid"),
		"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=32M", "--skip-log-bin", "--max-connections=200")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start mariadbd: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(s.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		if err = db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("mariadbd exited while starting: %s", s.LogTail(10))
		case <-ctx.Done():
			s.Kill()
			return fmt.Errorf("mariadbd did not answer within a minute: %v: %s", err, s.LogTail(10))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DSN is a go-sql-driver/mysql data source name for database db ("" for
// none) as root.
func (s *Server) DSN(db string) string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", s.Addr(), db
	c.ParseTime, c.MultiStatements = true, true
	return c.FormatDSN()
}

// Addr is the host:port mariadbd listens on (the same after a restart).
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// freePort picks mariadbd's port by freeport's rule: mariadbd binds it
// at each start, a restart after Kill included, and a port of the
// kernel's ephemeral range could meanwhile go to an outgoing connection.
func freePort() (int, error) {
	addr, err := freeport.Addr("127.0.0.1")
	if err != nil {
		return 0, fmt.Errorf("find a free port for mariadbd: %w", err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// CreateDatabase makes a database and returns its DSN.
func (s *Server) CreateDatabase(name string) (string, error) {
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE `" + strings.ReplaceAll(name, "`", "") + "`"); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// Kill kills mariadbd at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Stop shuts mariadbd down cleanly (SIGTERM), killing it after 30 s.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// LogTail is the end of mariadbd's log.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(s.log)
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
