package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mailhook/mailhook/internal/testenv"
)

// EnvPgBouncer names a pgbouncer binary to use instead of the one on PATH or in /usr/sbin.
const EnvPgBouncer = "PGBOUNCER"

// PgBouncerPoolSize is the server connections PgBouncer keeps per database and user: fewer
// than a test store's pool (PoolMaxConns), so consecutive transactions of one client
// connection land on different server connections, as in production.
const PgBouncerPoolSize = 4

// PgBouncer starts a PgBouncer of the test's own in transaction pooling mode in front of the
// local PostgreSQL database that dbURL names (trust auth, user postgres), stopped when the test
// ends, and returns dbURL pointed at it. Without a pgbouncer binary it skips under -short and
// fails otherwise, with how to get one (scripts/ensure-pgbouncer.sh): CI must not pass by
// skipping.
func PgBouncer(t testing.TB, dbURL string) string {
	t.Helper()
	bin, err := pgbouncerBinary()
	if err != nil {
		if testing.Short() {
			t.Skipf("%v (skipped under -short)", err)
		}
		t.Fatalf("PgBouncer is required for this test: %v (run scripts/ensure-pgbouncer.sh, or go test -short to skip)", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgbouncer: parse database url: %v", err)
	}
	dir := pgbouncerDir(t)
	// A port from the suite's own range (MAILHOOK_TEST_PORTS), outside the ephemeral range an
	// outgoing connection (of this suite, or of another beside it) may take meanwhile.
	_, portStr, _ := net.SplitHostPort(testenv.FreeHostPort(t))
	port, _ := strconv.Atoi(portStr)
	users := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
logfile = %s
pidfile = %s
`, u.Hostname(), cmp.Or(u.Port(), "5432"), port, users, PgBouncerPoolSize,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; it drops to this user itself.
		conf += "user = postgres\n"
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}

	cmd := exec.Command(bin, ini)
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgbouncer: start %s: %v", bin, err)
	}
	exited := make(chan struct{}) // closed when it has exited, with exitErr set
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // SIGINT: safe shutdown, waits for no client
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// Listening is what the wait is for; its log growing is the progress (testenv.Wait: no fixed
	// total, a loaded machine may take its time), and an exit ends it at once.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(dir, "pgbouncer.log")
	var dialErr error
	err = testenv.Wait("pgbouncer listening on "+addr, testenv.Stall, func() (int64, bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return 0, true, nil
		}
		dialErr = err
		select {
		case <-exited:
			return 0, true, nil // reported below
		default:
		}
		var size int64
		if fi, err := os.Stat(logPath); err == nil {
			size = fi.Size()
		}
		return size, false, nil
	})
	select {
	case <-exited:
		log, _ := os.ReadFile(logPath)
		t.Fatalf("pgbouncer exited at start (%v): %s", exitErr, log)
	default:
	}
	if err != nil {
		t.Fatalf("%v; last connect: %v", err, dialErr)
	}
	u.Host = addr
	return u.String()
}

func pgbouncerBinary() (string, error) {
	if p := os.Getenv(EnvPgBouncer); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvPgBouncer, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	// Debian installs it in /usr/sbin, which a non-root PATH often lacks.
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("no pgbouncer binary (looked at $" + EnvPgBouncer + ", on PATH and at /usr/sbin/pgbouncer)")
}

// pgbouncerDir holds the config, log and pid file. As root PgBouncer runs as postgres, which
// cannot enter t.TempDir() (0700, root's), so the directory is then its own, owned by postgres.
func pgbouncerDir(t testing.TB) string {
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgbouncer: running as root needs a postgres user to run it as: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "mailhook-pgbouncer-")
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	return dir
}
