package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"berth.dev/sandbox/testenv"
	"github.com/jackc/pgx/v5"
)

// postgres is a PostgreSQL server of the test's own, in a temporary folder,
// built from the same server binaries scripts/test-services uses, so that
// restarting it disturbs no other test.
type postgres struct {
	t    testing.TB
	bin  string
	data string
	sock string
	DSN  string
	// env is the server's extra environment (startPostgresSkewed's
	// libfaketime).
	env []string
}

// libfaketime is Debian's libfaketime (scripts/test-services installs
// it): preloaded into PostgreSQL, it offsets the server's clock. It works
// on PostgreSQL, which reads the time through libc, and would not on the
// Go binaries, which read it from the vDSO.
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// pgBinDir finds PostgreSQL 15's server binaries.
func pgBinDir() string {
	for _, d := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	return ""
}

// startPostgres initialises and starts a private server on a Unix socket
// (no TCP), owned by the postgres user (initdb refuses root). It skips
// under -short, and (fails under CI=true) when the binaries or the postgres
// user are missing.
func startPostgres(t testing.TB) *postgres {
	t.Helper()
	return startPostgresSkewed(t, 0)
}

// startPostgresSkewed is startPostgres whose server's clock runs offset
// from the host's (libfaketime); the offset is checked from the server's
// own now().
func startPostgresSkewed(t testing.TB, offset time.Duration) *postgres {
	t.Helper()
	testenv.SkipShort(t, "a private PostgreSQL server")
	var env []string
	if offset != 0 {
		if _, err := os.Stat(libfaketime); err != nil {
			msg := "a skewed PostgreSQL needs " + libfaketime + " (scripts/test-services up installs libfaketime)"
			testenv.Unavailable(t, msg)
		}
		env = []string{"LD_PRELOAD=" + libfaketime, fmt.Sprintf("FAKETIME=%+d", int64(offset/time.Second)), "FAKETIME_DONT_FAKE_MONOTONIC=1"}
	}
	bin := pgBinDir()
	pgUser, err := user.Lookup("postgres")
	if bin == "" || err != nil || os.Geteuid() != 0 {
		msg := "a private PostgreSQL needs the PostgreSQL 15 server binaries, the postgres user and root (run scripts/test-services up)"
		testenv.Unavailable(t, msg)
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	dir, err := os.MkdirTemp("", "bpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	p := &postgres{t: t, bin: bin, data: filepath.Join(dir, "data"), sock: dir, env: env}
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// fsync off is safe here: an immediate stop kills processes, not the
	// machine, so written WAL survives. synchronous_commit stays on: with
	// it off, a crash loses acknowledged commits, which no database
	// client can be expected to survive.
	conf := fmt.Sprintf("listen_addresses = ''\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 100\n", dir)
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(conf)
	_ = f.Close()
	p.start()
	t.Cleanup(func() { _, _ = p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop") })
	if out, err := p.run("createdb", "-h", dir, "-U", "postgres", "berth"); err != nil {
		t.Fatalf("createdb: %v\n%s", err, out)
	}
	p.DSN = "postgres:///berth?host=" + url.QueryEscape(dir) + "&user=postgres"
	if offset != 0 {
		p.requireOffset(offset)
	}
	return p
}

// requireOffset fails the test unless the server's now() is offset from
// the host's clock by offset (within a few seconds).
func (p *postgres) requireOffset(offset time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var db time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&db); err != nil {
		p.t.Fatal(err)
	}
	if got := time.Until(db); (got - offset).Abs() > 5*time.Second {
		p.t.Fatalf("the skewed server's clock is %v off the host's, want %v", got, offset)
	}
}

// run runs one of the server binaries as the postgres user.
func (p *postgres) run(name string, args ...string) ([]byte, error) {
	return p.runEnv(nil, name, args...)
}

// runEnv is run with env added to the binary's environment.
func (p *postgres) runEnv(env []string, name string, args ...string) ([]byte, error) {
	argv := append([]string{"-u", "postgres", "--", "env"}, env...)
	cmd := exec.Command("runuser", append(append(argv, filepath.Join(p.bin, name)), args...)...)
	return cmd.CombinedOutput()
}

func (p *postgres) start() {
	p.t.Helper()
	if out, err := p.runEnv(p.env, "pg_ctl", "-D", p.data, "-l", filepath.Join(p.sock, "log"), "-w", "-t", "30", "start"); err != nil {
		p.t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// crash stops the server the way a crash would (immediate mode: no
// checkpoint, every connection dropped) and returns when it is down.
func (p *postgres) crash() {
	p.t.Helper()
	if out, err := p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
		p.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// exhaust opens connections to the server until it refuses one (every
// slot taken, the superuser's reserved ones included: the suite connects
// as postgres, like Core) and returns a function that closes them. With
// evict it then ends every other client backend (pg_terminate_backend,
// as an administrator or a failover would: Core's pooled connections
// among them) and takes the slots they free, so Core must connect again
// while none is free; evicted is how many it ended.
func (p *postgres) exhaust(evict bool) (held, evicted int, release func()) {
	p.t.Helper()
	var conns []*pgx.Conn
	fill := func() {
		for range 200 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := pgx.Connect(ctx, p.DSN)
			cancel()
			if err != nil {
				break
			}
			conns = append(conns, conn)
		}
	}
	fill()
	if evict && len(conns) > 0 {
		pids := make([]int32, len(conns))
		for i, conn := range conns {
			pids[i] = int32(conn.PgConn().PID())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := conns[0].QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND pid <> ALL($1)`, pids).Scan(&evicted)
		cancel()
		if err != nil {
			p.t.Fatalf("terminating the other backends: %v", err)
		}
		fill()
	}
	return len(conns), evicted, func() {
		for _, conn := range conns {
			_ = conn.Close(context.Background())
		}
	}
}
