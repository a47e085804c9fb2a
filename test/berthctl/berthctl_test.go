package berthctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestOperatorDrivesBerthWithBerthctl is an operator's whole path through
// berthctl against a real Core, node agent and engine: login (and what
// overrides it), enrollment tokens, enrolling and enabling a node, the
// first deployment and its replacement, a Session, Turns whose output is
// streamed live and byte for byte with their exit status, Ctrl-C
// cancelling a Turn, allocations, deletion, and retiring and removing the
// node; every command in its table and its JSON form, and refusals
// printed with their fixed reason. What berthctl reports is checked
// against the admin API.
func TestOperatorDrivesBerthWithBerthctl(t *testing.T) {
	host, image, engine := engineOf(t)
	core, cc, ctx, installation := startCore(t, engine)
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	turnsAPI := adminv1.NewTurnServiceClient(cc)
	deploymentAPI := adminv1.NewDeploymentServiceClient(cc)

	tokenFile := filepath.Join(core.StateDir, "admin-token")
	c := newCtl(t, core.AdminToken(t))
	addr := core.AdminAddr()

	// A bad command line exits 2; a command without settings says how to
	// give them.
	c.fails(2, "error: unknown flag: --bogus", "node", "list", "--bogus")
	c.fails(2, "error: berthctl node get takes NODE", "node", "get")
	c.fails(1, "error: not_logged_in: no admin API address: run 'berthctl login", "node", "list")

	// login refuses a token Core does not accept and stores nothing.
	wrong := filepath.Join(t.TempDir(), "wrong-token")
	if err := os.WriteFile(wrong, []byte("berth-admin-v1.0000000000000000000000000000000000000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fails(1, "error: unauthenticated: invalid admin bearer token\n", "login", "--address", addr, "--token-file", wrong)
	if _, err := os.Stat(c.config); !os.IsNotExist(err) {
		t.Fatalf("a refused login wrote the config file: %v", err)
	}

	// login stores the address and the token file's path, never the token.
	r := c.ok("login", "--address", addr, "--token-file", tokenFile)
	if !strings.Contains(r.stdout, "Logged in to "+addr+": installation "+installation) {
		t.Fatalf("login: %v", r)
	}
	var login adminv1.GetInstallationResponse
	c.json(&login, "login", "--address", addr, "--token-file", tokenFile)
	if login.GetInstallation().GetId() != installation {
		t.Fatalf("login -o json: %v", &login)
	}
	if r := c.ok("installation", "get"); value(t, r.stdout, "ID") != installation || value(t, r.stdout, "DEPLOYMENT GENERATION") != "0" {
		t.Fatalf("installation get: %v", r)
	}
	var inst adminv1.GetInstallationResponse
	c.json(&inst, "installation", "get")
	if inst.GetInstallation().GetId() != installation || inst.GetInstallation().GetOwnerEpoch() == 0 {
		t.Fatalf("installation get -o json: %v", &inst)
	}
	stored, err := os.ReadFile(c.config)
	if err != nil {
		t.Fatal(err)
	}
	var settings map[string]string
	if err := json.Unmarshal(stored, &settings); err != nil || len(settings) != 2 ||
		settings["address"] != addr || settings["token_file"] != tokenFile {
		t.Fatalf("config file %s: %v", stored, err)
	}
	if info, _ := os.Stat(c.config); info.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode %v", info.Mode())
	}
	c.noToken(string(stored))

	// Flags and the environment override the stored settings.
	closed := stack.FreeAddr(t)
	c.fails(1, "error: core_unreachable: cannot reach the admin API at "+closed, "node", "list", "--address", closed)
	if r := c.runEnv(nil, []string{"BERTH_ADMIN_ADDRESS=" + closed}, "node", "list"); r.code != 1 || !strings.Contains(r.stderr, closed) {
		t.Fatalf("BERTH_ADMIN_ADDRESS did not override the config: %v", r)
	}
	if r := c.runEnv(nil, []string{"BERTHCTL_CONFIG=" + filepath.Join(c.home, "none.json"),
		"BERTH_ADMIN_ADDRESS=" + addr, "BERTH_ADMIN_TOKEN_FILE=" + tokenFile}, "node", "list"); r.code != 0 {
		t.Fatalf("settings from the environment alone: %v", r)
	}
	c.fails(1, "error: address_not_loopback:", "node", "list", "--address", "192.0.2.1:7700")

	// Enrollment tokens: one written to a file, one printed, one revoked.
	tokenOut := filepath.Join(t.TempDir(), "enroll.token")
	r = c.ok("node", "token", "create", "--ttl", "10m", "--out", tokenOut)
	tokenName := value(t, r.stdout, "NAME")
	if value(t, r.stdout, "STATE") != "ACTIVE" || value(t, r.stdout, "TOKEN") != "written to "+tokenOut+" (mode 0600)" {
		t.Fatalf("token create: %v", r)
	}
	enrollText, err := os.ReadFile(tokenOut)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(tokenOut); info.Mode().Perm() != 0o600 || !strings.HasPrefix(string(enrollText), "berth-enroll-v1.") ||
		strings.Contains(r.stdout, strings.TrimSpace(string(enrollText))) {
		t.Fatalf("token file %v, printed %q", info.Mode(), r.stdout)
	}
	var printed adminv1.CreateEnrollmentTokenResponse
	c.json(&printed, "node", "token", "create")
	if !strings.HasPrefix(printed.GetTokenText(), "berth-enroll-v1.") || printed.GetEnrollmentToken().GetState() != adminv1.EnrollmentToken_STATE_ACTIVE {
		t.Fatalf("token create -o json: %v", &printed)
	}
	revoked := printed.GetEnrollmentToken().GetName()
	r = c.ok("node", "token", "revoke", id(revoked))
	if value(t, r.stdout, "NAME") != revoked || value(t, r.stdout, "STATE") != "REVOKED" {
		t.Fatalf("token revoke: %v", r)
	}
	r = c.ok("node", "token", "list")
	if row := tableRow(t, r.stdout, []string{"NAME", "STATE", "CREATED", "EXPIRES", "NODE"}, tokenName); row[1] != "ACTIVE" {
		t.Fatalf("token list: %v", r)
	}
	if strings.Contains(r.stdout, revoked) {
		t.Fatalf("token list shows the revoked token without --show-inactive: %v", r)
	}
	var tokens adminv1.ListEnrollmentTokensResponse
	c.json(&tokens, "node", "token", "list", "--show-inactive")
	if len(tokens.GetEnrollmentTokens()) != 2 || tokens.GetEnrollmentTokens()[1].GetState() != adminv1.EnrollmentToken_STATE_REVOKED {
		t.Fatalf("token list --show-inactive -o json: %v", &tokens)
	}

	// The node enrolls with the token berthctl wrote; berthctl enables it.
	listen := stack.FreeAddr(t)
	node := stack.PrepareNode(t, &stack.Installation{ID: installation}, stack.NodeOptions{
		Socket: strings.TrimPrefix(host, "unix://"), Image: image, Listen: listen, Network: "bridge",
	})
	if out, code := stack.EnrollCmd(t, node, core.PublicAddr(), strings.TrimSpace(string(enrollText)), listen); code != 0 {
		t.Fatalf("enroll: %s", out)
	}
	node.Start()
	t.Cleanup(node.Stop)
	var nodes adminv1.ListNodesResponse
	c.json(&nodes, "node", "list")
	if len(nodes.GetNodes()) != 1 || nodes.GetNodes()[0].GetState() != adminv1.Node_STATE_ENROLLED {
		t.Fatalf("node list -o json: %v", &nodes)
	}
	nodeName := nodes.GetNodes()[0].GetName()
	r = c.ok("node", "list")
	if row := tableRow(t, r.stdout, []string{"NAME", "STATE", "CONNECTED", "READY", "GENERATION", "ACTIVE", "ADDRESS"}, nodeName); row[1] != "ENROLLED" || row[6] != listen {
		t.Fatalf("node list: %v", r)
	}
	r = c.ok("node", "enable", id(nodeName))
	if value(t, r.stdout, "STATE") != "ENABLED" {
		t.Fatalf("node enable: %v", r)
	}
	stack.WaitNode(t, ctx, nodesAPI, nodeName, stack.Connected)
	var got adminv1.GetNodeResponse
	c.json(&got, "node", "get", nodeName)
	if got.GetNode().GetState() != adminv1.Node_STATE_ENABLED || !got.GetNode().GetPresence().GetConnected() {
		t.Fatalf("node get -o json: %v", &got)
	}
	if r := c.ok("node", "get", nodeName); value(t, r.stdout, "CONNECTED") != "yes" {
		t.Fatalf("node get: %v", r)
	}

	// A refusal prints its fixed reason and what to do, and exits 1.
	c.fails(1, "error: node_enabled: node is enabled: retire it first\n", "node", "remove", nodeName)

	// The first deployment: previewed from flags, committed from a file.
	r = c.ok("deployment", "preview", "--provider", "docker", "--cpu-millis", "250", "--memory-bytes", "256Mi",
		"--disk-bytes", "1Gi", "--max-active", "4", "--max-retained", "4")
	if value(t, r.stdout, "CHANGED") != "yes" || value(t, r.stdout, "EXPECTED GENERATION") != "0" ||
		value(t, r.stdout, "MEMORY BYTES") != "268435456 (256Mi)" || value(t, r.stdout, "PROVIDER") != "docker" ||
		value(t, r.stdout, "SUSPENSION") != "after 15m0s idle, snapshots kept 168h0m0s" {
		t.Fatalf("deployment preview (without a suspension policy: Docker's registered defaults): %v", r)
	}
	if r := c.ok("deployment", "preview", "--provider", "docker", "--cpu-millis", "250", "--memory-bytes", "256Mi",
		"--disk-bytes", "1Gi", "--max-active", "4", "--max-retained", "4", "--no-suspension"); value(t, r.stdout, "SUSPENSION") != "off" {
		t.Fatalf("deployment preview --no-suspension: %v", r)
	}
	var preview adminv1.PreviewDeploymentResponse
	c.json(&preview, "deployment", "preview", "--provider", "docker", "--cpu-millis", "250", "--memory-bytes", "256Mi",
		"--disk-bytes", "1Gi", "--max-active", "4", "--max-retained", "4")
	if !preview.GetChanged() || preview.GetDeployment().GetSpecification().GetDiskBytes() != 1<<30 {
		t.Fatalf("deployment preview -o json: %v", &preview)
	}
	candidate := filepath.Join(t.TempDir(), "candidate.json")
	if err := os.WriteFile(candidate, []byte(`{"providerKind":"docker","specification":{"cpuMillis":"250",
		"memoryBytes":"268435456","diskBytes":"1073741824","maxActive":4,"maxRetained":4}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var commit adminv1.CommitDeploymentResponse
	c.json(&commit, "deployment", "commit", "-f", candidate, "--expected-generation", "0")
	if commit.GetDeployment().GetGeneration() != 1 || commit.GetDeployment().GetSpecification().GetMemoryBytes() != 256<<20 {
		t.Fatalf("deployment commit -o json: %v", &commit)
	}
	stack.WaitPublished(t, ctx, cc, 1)
	c.fails(1, "error: deployment_committed: a deployment is committed: replace it with ReplaceDeployment",
		"deployment", "commit", "-f", candidate, "--memory-bytes", "512Mi", "--expected-generation", "1")

	// A Session, waited for until its Runtime accepts Turns, in the
	// default project (migration 0022's fixed ids).
	const defaultProject = "tenants/00000000-0000-4000-8000-000000000001/projects/00000000-0000-4000-8000-000000000002"
	r = c.ok("session", "create", "--display-name", "berthctl", "--wait")
	session := value(t, r.stdout, "NAME")
	if value(t, r.stdout, "STATE") != "ACTIVE" || value(t, r.stdout, "EXECUTION ADMITTED") != "yes" || value(t, r.stdout, "NODE") != nodeName {
		t.Fatalf("session create --wait: %v", r)
	}
	if r.stderr != "" {
		t.Fatalf("session create --wait wrote to stderr, which is not a terminal: %q", r.stderr)
	}
	if s, err := sessionsAPI.GetSession(ctx, &adminv1.GetSessionRequest{Name: session}); err != nil || !s.GetSession().GetEnvironment().GetExecutionAdmitted() {
		t.Fatalf("GetSession after create --wait: %v %v", s, err)
	}
	r = c.ok("session", "list")
	if row := tableRow(t, r.stdout, []string{"NAME", "STATE", "ADMITTED", "PHASE", "NODE", "CREATED", "DISPLAY NAME"}, session); row[1] != "ACTIVE" || row[2] != "yes" || row[6] != "berthctl" {
		t.Fatalf("session list: %v", r)
	}
	var sessions adminv1.ListSessionsResponse
	c.json(&sessions, "session", "list")
	if len(sessions.GetSessions()) != 1 || sessions.GetSessions()[0].GetName() != session {
		t.Fatalf("session list -o json: %v", &sessions)
	}
	var gotSession adminv1.GetSessionResponse
	c.json(&gotSession, "session", "get", id(session))
	if gotSession.GetSession().GetDisplayName() != "berthctl" || gotSession.GetSession().GetAllocation() == "" {
		t.Fatalf("session get -o json: %v", &gotSession)
	}
	if r := c.ok("session", "get", session); value(t, r.stdout, "RUNTIME CONNECTED") != "yes" ||
		value(t, r.stdout, "PROJECT") != defaultProject {
		t.Fatalf("session get: %v", r)
	}
	// The project filter: the default project lists the Session, a project
	// that does not exist lists nothing.
	c.json(&sessions, "session", "list", "--project", defaultProject)
	if len(sessions.GetSessions()) != 1 || sessions.GetSessions()[0].GetName() != session {
		t.Fatalf("session list --project %s: %v", defaultProject, &sessions)
	}
	c.json(&sessions, "session", "list", "--project", "tenants/"+uuid.NewString()+"/projects/"+uuid.NewString())
	if len(sessions.GetSessions()) != 0 {
		t.Fatalf("session list --project of a missing project: %v", &sessions)
	}

	// turn run: stdout, stderr and the exit status byte for byte, stdin
	// from a file, environment from a flag.
	stdin := []byte("line one\n\x00\xffbinary\n")
	stdinFile := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(stdinFile, stdin, 0o600); err != nil {
		t.Fatal(err)
	}
	r = c.run("turn", "run", session, "--stdin", stdinFile, "--env", "GREETING=hi there", "--",
		"sh", "-c", `cat; printf 'to stderr\n' >&2; printf "$GREETING"; exit 3`)
	if r.code != 3 || r.stdout != string(stdin)+"hi there" || r.stderr != "to stderr\n" {
		t.Fatalf("turn run: %v", r)
	}
	// Stdin from a pipe; an environment value from berthctl's own
	// environment (never in argv); a script.
	r = c.runEnv([]byte("piped\x00bytes"), []string{"GREETING=from the environment"},
		"turn", "run", id(session), "--env", "GREETING", "--shell", `cat; printf ' %s' "$GREETING"`)
	if r.code != 0 || r.stdout != "piped\x00bytes from the environment" || r.stderr != "" {
		t.Fatalf("turn run with piped stdin: %v", r)
	}
	// A Turn that cannot start, and one past its timeout.
	c.fails(1, "error: program_not_found: "+session+"/turns/", "turn", "run", session, "--", "/no/such/program")
	c.fails(124, "error: turn_timed_out: "+session+"/turns/", "turn", "run", session, "--timeout", "1s", "--", "sleep", "30")

	// Output is streamed live: the first line arrives while the Turn still
	// runs.
	live := c.start(nil, "turn", "run", session, "--shell", "echo first; sleep 3; echo second")
	line, err := live.out.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q: %v", line, err)
	}
	running := lastTurn(t, ctx, turnsAPI, session)
	if running.GetState() != adminv1.Turn_STATE_RUNNING {
		t.Fatalf("the first line arrived once the Turn was %v: not live", running.GetState())
	}
	if rest, code := live.wait(t); code != 0 || line+rest != "first\nsecond\n" {
		t.Fatalf("live turn: exit %d, stdout %q", code, line+rest)
	}

	// With stderr on a terminal, a progress line shows the Turn until its
	// first output, and is cleared.
	out, term, code := c.runOnTerminal(t, "turn", "run", session, "--shell", "sleep 2; echo done")
	if code != 0 || out != "done\n" || !strings.Contains(term, "\r\x1b[K"+session+"/turns/") ||
		!strings.Contains(term, ": RUNNING (") || !strings.HasSuffix(term, "\r\x1b[K") {
		t.Fatalf("turn run on a terminal: exit %d, stdout %q, terminal %q", code, out, term)
	}

	// Ctrl-C cancels the running Turn and exits 130.
	sleeper := c.start(nil, "turn", "run", session, "--", "sleep", "60")
	var sleeping *adminv1.Turn
	stack.WaitFor(t, time.Minute, "the sleep Turn running", func() bool {
		sleeping = lastTurn(t, ctx, turnsAPI, session)
		args := sleeping.GetCommand().GetArgv().GetArgs()
		return len(args) == 2 && args[0] == "sleep" && args[1] == "60" && sleeping.GetState() == adminv1.Turn_STATE_RUNNING
	})
	if err := sleeper.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_, code = sleeper.wait(t)
	stderr := sleeper.stderr.String()
	if code != 130 || !strings.Contains(stderr, "berthctl: cancelling "+sleeping.GetName()) ||
		!strings.Contains(stderr, "error: turn_cancelled: "+sleeping.GetName()+" was cancelled\n") {
		t.Fatalf("after SIGINT: exit %d, stderr %q", code, stderr)
	}
	if g, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: sleeping.GetName()}); err != nil ||
		g.GetTurn().GetState() != adminv1.Turn_STATE_CANCELLED || g.GetTurn().GetCancelTime() == nil {
		t.Fatalf("the interrupted Turn: %v %v", g, err)
	}

	// turn list, get and cancel.
	var turns adminv1.ListTurnsResponse
	c.json(&turns, "turn", "list", session)
	if len(turns.GetTurns()) != 7 || turns.GetTurns()[0].GetExitCode() != 3 || turns.GetTurns()[6].GetName() != sleeping.GetName() {
		t.Fatalf("turn list -o json: %v", &turns)
	}
	first := turns.GetTurns()[0].GetName()
	r = c.ok("turn", "list", id(session))
	if row := tableRow(t, r.stdout, []string{"NAME", "STATE", "EXIT", "STDOUT", "STDERR", "CREATED", "ENDED", "COMMAND"}, first); row[1] != "COMPLETED" || row[2] != "3" || row[3] != fmt.Sprint(len(stdin)+8) || row[4] != "10" {
		t.Fatalf("turn list: %v", r)
	}
	var gotTurn adminv1.GetTurnResponse
	c.json(&gotTurn, "turn", "get", first)
	if gotTurn.GetTurn().GetStdoutBytes() != int64(len(stdin))+8 || gotTurn.GetTurn().GetStdin() != nil {
		t.Fatalf("turn get -o json: %v", &gotTurn)
	}
	if r := c.ok("turn", "get", first); value(t, r.stdout, "EXIT CODE") != "3" || value(t, r.stdout, "STATE") != "COMPLETED" {
		t.Fatalf("turn get: %v", r)
	}
	// Cancelling a completed Turn changes nothing; a queued or running one
	// is cancelled.
	if r := c.ok("turn", "cancel", first); value(t, r.stdout, "STATE") != "COMPLETED" {
		t.Fatalf("turn cancel of a completed Turn: %v", r)
	}
	sub, err := turnsAPI.SubmitTurn(ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(),
		Turn: &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "sleep 60"}}, Timeout: durationpb.New(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled adminv1.CancelTurnResponse
	c.json(&cancelled, "turn", "cancel", sub.GetTurn().GetName())
	if cancelled.GetTurn().GetCancelTime() == nil {
		t.Fatalf("turn cancel -o json: %v", &cancelled)
	}
	stack.WaitFor(t, 30*time.Second, "the cancelled Turn ending", func() bool {
		g, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: sub.GetTurn().GetName()})
		return err == nil && g.GetTurn().GetState() == adminv1.Turn_STATE_CANCELLED
	})

	// Allocations.
	var allocs adminv1.ListAllocationsResponse
	c.json(&allocs, "alloc", "list")
	if len(allocs.GetAllocations()) != 1 || allocs.GetAllocations()[0].GetSession() != session {
		t.Fatalf("alloc list -o json: %v", &allocs)
	}
	alloc := allocs.GetAllocations()[0].GetName()
	r = c.ok("alloc", "list")
	if row := tableRow(t, r.stdout, []string{"NAME", "STATE", "SESSION", "NODE", "GENERATION", "CREATE SETTLED", "CREATED"}, alloc); row[1] != "ACTIVE" || row[3] != nodeName || row[4] != "1" {
		t.Fatalf("alloc list: %v", r)
	}
	if r := c.ok("alloc", "get", id(alloc)); value(t, r.stdout, "SESSION") != session {
		t.Fatalf("alloc get: %v", r)
	}

	// Suspension by hand: a file written in the workspace survives suspend
	// --wait, after which the engine runs no container of the installation
	// (read there; the snapshot's holder is never started), and resume
	// --wait, after which a Turn in
	// the new container reads it back.
	if r := c.run("turn", "run", session, "--shell", "printf kept > /workspace/suspended.txt"); r.code != 0 {
		t.Fatalf("turn run before the suspension: %v", r)
	}
	runningContainers := func() int {
		t.Helper()
		running, err := engine.ContainerList(ctx, client.ContainerListOptions{Filters: stack.InstallationFilter(installation)})
		if err != nil {
			t.Fatal(err)
		}
		return len(running.Items)
	}
	if n := runningContainers(); n != 1 {
		t.Fatalf("before the suspension the installation runs %d containers on the engine, want 1", n)
	}
	if r := c.ok("session", "suspend", session, "--wait"); value(t, r.stdout, "COMPUTE PHASE") != "SUSPENDED" || value(t, r.stdout, "STATE") != "ACTIVE" {
		t.Fatalf("session suspend --wait: %v", r)
	}
	if n := runningContainers(); n != 0 {
		t.Fatalf("the suspended Session's installation runs %d containers on the engine", n)
	}
	if r := c.ok("session", "resume", id(session), "--wait"); value(t, r.stdout, "COMPUTE PHASE") != "RUNNING" || value(t, r.stdout, "EXECUTION ADMITTED") != "yes" {
		t.Fatalf("session resume --wait: %v", r)
	}
	if r := c.run("turn", "run", session, "--", "cat", "/workspace/suspended.txt"); r.code != 0 || r.stdout != "kept" {
		t.Fatalf("the workspace after resume: %v", r)
	}
	// Fork: two children with the Session's workspace, each its own
	// Session (a Turn in it reads the file), deleted again.
	r = c.ok("session", "fork", session, "--count", "2", "--wait", "-o", "json")
	var forked struct {
		Placed   int32 `json:"placed"`
		Children []struct {
			Name string `json:"name"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &forked); err != nil || forked.Placed != 2 || len(forked.Children) != 2 {
		t.Fatalf("session fork: %v (%v)", r, err)
	}
	for _, child := range forked.Children {
		if child.Name == session {
			t.Fatalf("session fork returned the source: %v", r)
		}
		if r := c.run("turn", "run", child.Name, "--", "cat", "/workspace/suspended.txt"); r.code != 0 || r.stdout != "kept" {
			t.Fatalf("the workspace of fork child %s: %v", child.Name, r)
		}
		c.ok("session", "delete", child.Name, "--wait")
	}
	c.fails(1, "error: invalid: invalid count: must be 1 to 128", "session", "fork", session, "--count", "129")
	// A Session with a running Turn is not suspended: the refusal says
	// what to wait for.
	busy, err := turnsAPI.SubmitTurn(ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(),
		Turn: &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "sleep 60"}}, Timeout: durationpb.New(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 30*time.Second, "the sleep 60 Turn running", func() bool {
		g, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: busy.GetTurn().GetName()})
		return err == nil && g.GetTurn().GetState() == adminv1.Turn_STATE_RUNNING
	})
	c.fails(1, "error: session_busy: ", "session", "suspend", session)
	if _, err := turnsAPI.CancelTurn(ctx, &adminv1.CancelTurnRequest{Name: busy.GetTurn().GetName()}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 30*time.Second, "the sleep 60 Turn cancelled", func() bool {
		g, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: busy.GetTurn().GetName()})
		return err == nil && g.GetTurn().GetState() == adminv1.Turn_STATE_CANCELLED
	})
	// The provider switch: disabled, CreateSession is refused with its
	// fixed reason; enabled again, nothing else changed.
	if r := c.ok("deployment", "disable"); !strings.HasPrefix(value(t, r.stdout, "PROVIDER DISABLED"), "since ") {
		t.Fatalf("deployment disable: %v", r)
	}
	c.fails(1, "error: provider_disabled: ", "session", "create", "--display-name", "refused")
	if r := c.ok("deployment", "enable"); value(t, r.stdout, "PROVIDER DISABLED") != "no" {
		t.Fatalf("deployment enable: %v", r)
	}

	// Replacing the deployment: a stale expected generation is refused;
	// the running Session keeps generation 1.
	c.fails(2, "error: replace needs --expected-generation", "deployment", "replace", "--memory-bytes", "384Mi", "--update-mask", "specification.memory_bytes")
	c.fails(1, "error: deployment_generation_moved: the expected generation is not the current one",
		"deployment", "replace", "--memory-bytes", "384Mi", "--update-mask", "specification.memory_bytes", "--expected-generation", "0")
	r = c.ok("deployment", "replace", "--memory-bytes", "384Mi", "--update-mask", "specification.memory_bytes", "--expected-generation", "1")
	if value(t, r.stdout, "GENERATION") != "2" || value(t, r.stdout, "CHANGED") != "yes" || value(t, r.stdout, "MEMORY BYTES") != "402653184 (384Mi)" ||
		value(t, r.stdout, "CPU MILLIS") != "250" {
		t.Fatalf("deployment replace: %v", r)
	}
	if d, err := deploymentAPI.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"}); err != nil ||
		d.GetDeployment().GetGeneration() != 2 || d.GetDeployment().GetSpecification().GetMemoryBytes() != 384<<20 {
		t.Fatalf("GetDeployment after replace: %v %v", d, err)
	}
	var deployment adminv1.GetDeploymentResponse
	c.json(&deployment, "deployment", "get")
	if deployment.GetDeployment().GetGeneration() != 2 || len(deployment.GetDeployment().GetRetainedGenerations()) == 0 ||
		deployment.GetDeployment().GetRetainedGenerations()[0].GetGeneration() != 1 {
		t.Fatalf("deployment get -o json: %v", &deployment)
	}
	if r := c.ok("deployment", "get"); value(t, r.stdout, "GENERATION") != "2" || !strings.HasPrefix(value(t, r.stdout, "RETAINED GENERATIONS"), "1 (1 allocation)") {
		t.Fatalf("deployment get: %v", r)
	}

	// Archive under a running Turn: the Turn is asked to cancel and its
	// Runtime reports CANCELLED (within the 20 s drain); the Session is
	// ARCHIVED with its Turns readable, runs nothing more, and its
	// container is gone from the engine (read there, not from Berth).
	archiving := c.start(nil, "turn", "run", session, "--", "sleep", "600")
	var longTurn *adminv1.Turn
	stack.WaitFor(t, time.Minute, "the sleep 600 Turn running", func() bool {
		longTurn = lastTurn(t, ctx, turnsAPI, session)
		args := longTurn.GetCommand().GetArgv().GetArgs()
		return len(args) == 2 && args[1] == "600" && longTurn.GetState() == adminv1.Turn_STATE_RUNNING
	})
	if r := c.ok("session", "archive", session); value(t, r.stdout, "STATE") != "ARCHIVED" {
		t.Fatalf("session archive: %v", r)
	}
	if _, code := archiving.wait(t); code == 0 {
		t.Fatal("the archived Session's running Turn exited 0")
	}
	if g, err := turnsAPI.GetTurn(ctx, &adminv1.GetTurnRequest{Name: longTurn.GetName()}); err != nil ||
		g.GetTurn().GetState() != adminv1.Turn_STATE_CANCELLED {
		t.Fatalf("the archived Session's running Turn: %v %v", g, err)
	}
	stack.WaitFor(t, time.Minute, "the archived Session's container gone from the engine", func() bool {
		containers, _ := stack.Owned(t, engine, installation)
		return containers == 0
	})
	if r := c.ok("session", "get", session); value(t, r.stdout, "STATE") != "ARCHIVED" {
		t.Fatalf("session get after archive: %v", r)
	}
	if r := c.ok("turn", "get", first); value(t, r.stdout, "EXIT CODE") != "3" {
		t.Fatalf("turn get of an archived Session's Turn: %v", r)
	}
	c.fails(1, "error: session_archived: the Session is archived: it keeps its history and runs nothing; create a new Session\n",
		"turn", "run", session, "--", "true")
	// The trail holds the archive as a decision, by the administrator.
	var trail adminv1.ListAuditEventsResponse
	c.json(&trail, "audit", "list", "--action", "session.archive", "--until", "0s")
	if len(trail.GetAuditEvents()) != 1 || trail.GetAuditEvents()[0].GetResource() != session || trail.GetAuditEvents()[0].GetActor() != "admin" {
		t.Fatalf("audit list --action session.archive: %v", &trail)
	}

	// Deletion, waited for; then the node is retired and removed.
	var deleted adminv1.DeleteSessionResponse
	c.json(&deleted, "session", "delete", session, "--wait")
	if deleted.GetSession().GetState() != adminv1.Session_STATE_DELETED {
		t.Fatalf("session delete --wait -o json: %v", &deleted)
	}
	if r := c.ok("session", "delete", session); value(t, r.stdout, "STATE") != "DELETED" {
		t.Fatalf("session delete of a deleted Session: %v", r)
	}
	if r := c.ok("node", "retire", nodeName); value(t, r.stdout, "STATE") != "RETIRED" {
		t.Fatalf("node retire: %v", r)
	}
	var removed adminv1.RemoveNodeResponse
	c.json(&removed, "node", "remove", id(nodeName))
	if removed.GetNode().GetState() != adminv1.Node_STATE_REMOVED {
		t.Fatalf("node remove -o json: %v", &removed)
	}
	if n, err := nodesAPI.GetNode(ctx, &adminv1.GetNodeRequest{Name: nodeName}); err != nil || n.GetNode().GetState() != adminv1.Node_STATE_REMOVED {
		t.Fatalf("GetNode after remove: %v %v", n, err)
	}
}

// lastTurn is the Session's latest Turn, from the admin API.
func lastTurn(t *testing.T, ctx context.Context, api adminv1.TurnServiceClient, session string) *adminv1.Turn {
	t.Helper()
	list, err := api.ListTurns(ctx, &adminv1.ListTurnsRequest{Parent: session, PageSize: 1000})
	if err != nil || len(list.GetTurns()) == 0 {
		t.Fatalf("ListTurns: %v %v", list, err)
	}
	return list.GetTurns()[len(list.GetTurns())-1]
}

// running is a started berthctl: its stdout read as it comes, its stderr
// kept.
type running struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr *bytes.Buffer
	c      *ctl
}

// start starts berthctl with args in the background.
func (c *ctl) start(env []string, args ...string) *running {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c.t.Cleanup(cancel)
	cmd := c.cmd(ctx, env, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	r := &running{cmd: cmd, out: bufio.NewReader(stdout), stderr: &bytes.Buffer{}, c: c}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	return r
}

// wait reads the rest of stdout and waits for the exit.
func (r *running) wait(t *testing.T) (rest string, code int) {
	t.Helper()
	var b strings.Builder
	_, _ = r.out.WriteTo(&b)
	_ = r.cmd.Wait()
	r.c.noToken(b.String(), r.stderr.String())
	return b.String(), r.cmd.ProcessState.ExitCode()
}

// runOnTerminal runs berthctl with its stderr on a pseudo-terminal and
// returns its stdout, what it wrote to the terminal and its exit status.
func (c *ctl) runOnTerminal(t *testing.T, args ...string) (stdout, terminal string, code int) {
	t.Helper()
	master, tty := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.cmd(ctx, nil, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, tty
	output := readAll(master)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	_ = cmd.Wait()
	term := <-output
	c.noToken(out.String(), string(term))
	return out.String(), string(term), cmd.ProcessState.ExitCode()
}
