package e2b

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/e2b/e2btest"
	"berth.dev/sandbox/testenv"
)

// sandboxScript is PID 1 of a fixture sandbox's private mount and PID
// namespaces until it execs the Runtime: it builds the sandbox's root
// under $1 from bind mounts (doc.go), with the sandbox's own directories
// ($2/home/runtime, $2/workspace) and berth-runtime ($3) at their fixed
// paths, sends everything the Runtime writes to $4, and chroots there. It
// refuses to mount anything unless its mount namespace differs from $5,
// the test's own: no mount can reach the host's.
const sandboxScript = `set -eu
root=$1 dir=$2 bin=$3 log=$4 hostns=$5
shift 5
exec >>"$log" 2>&1
if [ "$(readlink /proc/self/ns/mnt)" = "$hostns" ]; then
	echo "sandbox: not in a private mount namespace" >&2
	exit 1
fi
mkdir -p "$root/usr" "$root/etc" "$root/home/runtime" "$root/workspace" "$root/proc" "$root/dev" "$root/tmp"
for d in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then
		ln -s "$(readlink "/$d")" "$root/$d"
	elif [ -d "/$d" ]; then
		mkdir -p "$root/$d"
		mount --rbind "/$d" "$root/$d"
	fi
done
mount --rbind /usr "$root/usr"
mount --rbind /etc "$root/etc"
mount -t tmpfs -o mode=0755 tmpfs "$root/usr/local/bin"
: >"$root/usr/local/bin/berth-runtime"
mount --bind "$bin" "$root/usr/local/bin/berth-runtime"
mount --bind "$dir/home/runtime" "$root/home/runtime"
mount --bind "$dir/workspace" "$root/workspace"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
export HOME=/home/runtime PATH=/usr/local/bin:/usr/bin:/bin
exec /usr/sbin/chroot "$root" "$@"
`

// sandboxRunner is the fixture's Runner: the Runtime's start command
// (runtimebootstrap.BinaryPath) runs the real berth-runtime in the
// sandbox's own namespaces and root (sandboxScript), logging to a file of
// logDir named after the sandbox's directory; every other argv (the
// adapter's file writes) runs as e2btest.DefaultRunner maps it, into the
// sandbox's directories, which the Runtime sees at /home/runtime and
// /workspace.
func sandboxRunner(t *testing.T, logDir string) e2btest.Runner {
	t.Helper()
	hostNS := mountNamespace(t, "self")
	return func(dir string, argv []string) []string {
		if len(argv) == 0 || argv[0] != runtimebootstrap.BinaryPath {
			return e2btest.DefaultRunner(dir, argv)
		}
		return append([]string{"/usr/bin/unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
			"/bin/sh", "-c", sandboxScript, "sandbox",
			filepath.Join(dir, "root"), dir, runtimeBin, filepath.Join(logDir, filepath.Base(dir)+".log"), hostNS}, argv...)
	}
}

// requireNamespaces ends the test (testenv.Unavailable) unless this host
// lets the test create private mount and PID namespaces: root and
// util-linux's unshare.
func requireNamespaces(t *testing.T) {
	t.Helper()
	testenv.SkipShort(t, "root and private namespaces (unshare) for the fixture's sandboxes")
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "the fixture's sandboxes need root (private mount and PID namespaces)")
		return
	}
	if out, err := exec.Command("/usr/bin/unshare", "--mount", "--pid", "--fork", "--kill-child", "/bin/true").CombinedOutput(); err != nil {
		testenv.Unavailable(t, "unshare --mount --pid --fork failed here ("+err.Error()+": "+strings.TrimSpace(string(out))+")")
	}
}

// mountNamespace is the mount namespace of process pid ("self" for the
// test) as the kernel names it (mnt:[inode]).
func mountNamespace(t *testing.T, pid string) string {
	t.Helper()
	ns, err := os.Readlink(filepath.Join("/proc", pid, "ns", "mnt"))
	if err != nil {
		t.Fatalf("read the mount namespace of %s: %v", pid, err)
	}
	return ns
}

// proc is one process of the OS process table.
type proc struct {
	pid     string
	cmdline []string
	mnt     string
}

// processTable reads every process of /proc: its argv and its mount
// namespace (processes that end while it reads are left out).
func processTable() []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil {
			continue
		}
		mnt, err := os.Readlink(filepath.Join("/proc", pid, "ns", "mnt"))
		if err != nil {
			continue
		}
		out = append(out, proc{pid: pid, cmdline: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), mnt: mnt})
	}
	return out
}

// sandboxNamespace is the mount namespace of the fixture sandbox whose
// directory is dir, read from the process table: the namespace of the
// unshare process whose argv names dir ("" when there is none).
func sandboxNamespace(dir string) string {
	for _, p := range processTable() {
		if len(p.cmdline) > 0 && p.cmdline[0] == "/usr/bin/unshare" {
			for _, a := range p.cmdline {
				if a == dir {
					return p.mnt
				}
			}
		}
	}
	return ""
}

// processesIn lists the processes in mount namespace ns, or whose argv
// names dir, as "pid argv" lines.
func processesIn(ns, dir string) []string {
	var out []string
	for _, p := range processTable() {
		named := false
		for _, a := range p.cmdline {
			if a == dir {
				named = true
			}
		}
		if p.mnt == ns || named {
			out = append(out, p.pid+" "+strings.Join(p.cmdline, " "))
		}
	}
	return out
}
