#!/usr/bin/python3
"""An agent's loop over Berth's admin API: create a Session, wait until its
Runtime accepts Turns, upload an input file, run one Turn streaming its
output, download the file the Turn wrote, fork the Session into branches
that each run a Turn of their own and give back a result, delete them all.
It does what these berthctl commands do, with FileService's UploadFiles
and DownloadFiles between them:

    berthctl session create --wait
    berthctl turn run SESSION -- CMD [ARG...]
    berthctl session fork SESSION --count 2 --wait
    berthctl session delete SESSION --wait

Each branch (--forks, default 2; 0 skips the fork) starts with a copy of the
Session's workspace; its Turn writes "branch-N" and the size of result.txt
it found to branch.txt, which is downloaded from the branch and noted on
stderr ("branch N: branch-N SIZE").

The input (--input, default a line of text) becomes /workspace/input.txt;
the command (default: cat input.txt; wc -c < input.txt > result.txt) runs
in /workspace; when it completed, /workspace/result.txt (--result) is
downloaded and written to stdout after the command's output (a command that
wrote none is noted on stderr).

Run it from clients/python (or with clients/python on PYTHONPATH):

    BERTH_ADMIN_TOKEN_FILE=/var/lib/berth-core/admin-token \\
        /usr/bin/python3 examples/agent_loop.py
    /usr/bin/python3 examples/agent_loop.py --input "$(date)" --shell 'tr a-z A-Z < input.txt > result.txt'

It exits with the command's exit status; 124 when the Turn timed out, 130
when it was cancelled (Ctrl-C cancels it), 1 when it failed or anything
else went wrong.
"""

import argparse
import os
import sys
import time
import uuid

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import berth_client  # noqa: E402
from berth.admin.v1 import session_pb2, turn_pb2  # noqa: E402

CALL_TIMEOUT = 30  # seconds, every unary call (berthctl's bound)
POLL_INTERVAL = 0.5  # seconds between two reads of a Session being waited for
STREAM_RETRIES = 30  # reopenings of an output stream Core dropped, a second apart
INPUT_PATH = "input.txt"  # where the input lands, relative to /workspace
DEFAULT_INPUT = "hello from the agent loop\n"
DEFAULT_SCRIPT = f"cat {INPUT_PATH}; wc -c < {INPUT_PATH} > result.txt"

Session = session_pb2.Session
Turn = turn_pb2.Turn
STDOUT, STDERR = turn_pb2.OUTPUT_STREAM_STDOUT, turn_pb2.OUTPUT_STREAM_STDERR


class Failed(Exception):
    """The loop cannot go on; the message says why."""


def wait_session(client, name, timeout, goal):
    """Reads the Session until goal(session) is true and returns it."""
    deadline = time.monotonic() + timeout
    while True:
        s = client.sessions.GetSession(session_pb2.GetSessionRequest(name=name), timeout=CALL_TIMEOUT).session
        if goal(s):
            return s
        if time.monotonic() > deadline:
            raise Failed(f"wait_timeout: {name} is still {Session.State.Name(s.state)} after {timeout} s")
        time.sleep(POLL_INTERVAL)


def admitted(s):
    """create --wait's goal: the Runtime accepts Turns."""
    if s.state == Session.STATE_FAILED:
        raise Failed(f"{s.environment.failure_code or '-'}: {s.name} failed")
    if s.state in (Session.STATE_DELETING, Session.STATE_DELETED):
        raise Failed(f"session_deleted: {s.name} was deleted while waiting for it")
    return s.environment.execution_admitted


def stream_output(client, turn_name):
    """Writes the Turn's output to stdout and stderr until the stream ends
    with the Turn. A stream Core dropped (UNAVAILABLE) is reopened from the
    offsets already written, so every byte is written once, in order."""
    sent = {STDOUT: 0, STDERR: 0}
    out = {STDOUT: sys.stdout.buffer, STDERR: sys.stderr.buffer}
    retries = 0
    while True:
        req = turn_pb2.StreamTurnOutputRequest(name=turn_name, stdout_offset=sent[STDOUT], stderr_offset=sent[STDERR])
        try:
            for chunk in client.turns.StreamTurnOutput(req):  # no deadline: it lasts as long as the Turn
                retries = 0
                if chunk.stream not in sent:
                    continue
                data = chunk.data[max(0, sent[chunk.stream] - chunk.offset):]  # a reopened stream may repeat
                if data:
                    sent[chunk.stream] = chunk.offset + len(chunk.data)
                    out[chunk.stream].write(data)
                    out[chunk.stream].flush()
            return
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE or berth_client.error_reason(err) or retries >= STREAM_RETRIES:
                raise
            retries += 1
            time.sleep(1)


def outcome(turn):
    """The exit status for a terminal Turn, as berthctl's `turn run`."""
    if turn.state == Turn.STATE_COMPLETED:
        return turn.exit_code if 0 <= turn.exit_code <= 255 else 1
    why = {
        Turn.STATE_CANCELLED: (130, "turn_cancelled: the Turn was cancelled"),
        Turn.STATE_TIMED_OUT: (124, "turn_timed_out: the Turn ran past its timeout and was stopped"),
        Turn.STATE_FAILED: (1, f"{turn.failure_code or '-'}: the Turn could not be run"),
        Turn.STATE_UNCONFIRMED: (1, f"{turn.failure_code or '-'}: the Turn ran but its completion cannot be confirmed"),
    }.get(turn.state, (1, f"turn_not_ended: the output ended while the Turn is {Turn.State.Name(turn.state)}"))
    print(f"agent_loop: {why[1]}", file=sys.stderr)
    return why[0]


def download_result(client, name, path):
    """Writes the file at path of the Session to stdout; a file the command
    did not write is noted on stderr."""
    try:
        data = berth_client.download_file(client, name, path)
    except grpc.RpcError as err:
        if berth_client.error_reason(err) != "file_not_found":
            raise
        print(f"agent_loop: the command wrote no {path}", file=sys.stderr)
        return
    print(f"agent_loop: downloaded {path} ({len(data)} bytes)", file=sys.stderr)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def fork_branches(client, name, args):
    """Forks the Session into args.forks branches, runs one Turn in each and
    downloads what it wrote, then deletes the branches."""
    forked = client.sessions.ForkSession(session_pb2.ForkSessionRequest(
        name=name, request_id=str(uuid.uuid4()), count=args.forks, min_count=args.forks,
        display_name_prefix=f"{args.display_name}-branch",
    ), timeout=CALL_TIMEOUT)
    branches = [c.name for c in forked.children]
    print(f"agent_loop: forked {name} into {len(branches)} branches", file=sys.stderr)
    try:
        for i, branch in enumerate(branches):
            wait_session(client, branch, args.wait_timeout, admitted)
            script = f"printf 'branch-{i} %d\\n' \"$(wc -c < result.txt)\" > branch.txt"
            turn = client.turns.SubmitTurn(turn_pb2.SubmitTurnRequest(
                parent=branch, request_id=str(uuid.uuid4()), turn=Turn(command=turn_pb2.Command(shell_script=script))),
                timeout=CALL_TIMEOUT).turn
            for _ in client.turns.StreamTurnOutput(turn_pb2.StreamTurnOutputRequest(name=turn.name)):
                pass  # the branch's Turn prints nothing; the stream ends with it
            data = berth_client.download_file(client, branch, "branch.txt")
            print(f"agent_loop: branch {i}: {data.decode().strip()}", file=sys.stderr)
    finally:
        for branch in branches:
            client.sessions.DeleteSession(session_pb2.DeleteSessionRequest(name=branch), timeout=CALL_TIMEOUT)
        for branch in branches:
            wait_session(client, branch, args.wait_timeout, lambda s: s.state == Session.STATE_DELETED)


def run(client, args):
    # 1. Create the Session. request_id makes a retry of this call idempotent.
    created = client.sessions.CreateSession(session_pb2.CreateSessionRequest(
        request_id=str(uuid.uuid4()),
        session=Session(display_name=args.display_name, project=args.project),
    ), timeout=CALL_TIMEOUT).session
    name = created.name
    print(f"agent_loop: created {name}", file=sys.stderr)
    try:
        # 2. Wait until its Runtime accepts Turns.
        wait_session(client, name, args.wait_timeout, admitted)
        print(f"agent_loop: {name} admits Turns", file=sys.stderr)

        # 3. Upload the agent's input as one file (FILE_FORMAT_RAW), in chunks
        # of at most 1 MiB; berth_client.upload_tar sends a whole tree.
        data = args.input.encode()
        up = berth_client.upload_file(client, name, INPUT_PATH, data, mode=0o644)
        print(f"agent_loop: uploaded {INPUT_PATH} ({up.bytes} bytes)", file=sys.stderr)

        # 4. Run one Turn (in /workspace) and stream its output.
        if args.shell or not args.command:
            command = turn_pb2.Command(shell_script=args.shell or DEFAULT_SCRIPT)  # /bin/sh -c
        else:
            command = turn_pb2.Command(argv=turn_pb2.Argv(args=args.command))  # no shell, PATH lookup
        turn = Turn(command=command)
        if args.timeout:
            turn.timeout.FromSeconds(args.timeout)
        submitted = client.turns.SubmitTurn(turn_pb2.SubmitTurnRequest(
            parent=name, request_id=str(uuid.uuid4()), turn=turn), timeout=CALL_TIMEOUT).turn
        try:
            stream_output(client, submitted.name)
        except KeyboardInterrupt:
            client.turns.CancelTurn(turn_pb2.CancelTurnRequest(name=submitted.name), timeout=CALL_TIMEOUT)
            print(f"agent_loop: cancelled {submitted.name}", file=sys.stderr)
            return 130
        ended = client.turns.GetTurn(turn_pb2.GetTurnRequest(name=submitted.name), timeout=CALL_TIMEOUT).turn

        # 5. Download what the command wrote (FILE_FORMAT_RAW).
        if ended.state == Turn.STATE_COMPLETED and args.result:
            download_result(client, name, args.result)

        # 6. Fork: branches that start from this workspace, each with its own
        # sandbox; their work never touches the Session's or each other's.
        if ended.state == Turn.STATE_COMPLETED and args.forks > 0:
            fork_branches(client, name, args)
        return outcome(ended)
    finally:
        # 7. Delete the Session and wait until its cleanup is confirmed.
        client.sessions.DeleteSession(session_pb2.DeleteSessionRequest(name=name), timeout=CALL_TIMEOUT)
        wait_session(client, name, args.wait_timeout, lambda s: s.state == Session.STATE_DELETED)
        print(f"agent_loop: deleted {name}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description="Create a Session, upload input.txt, run one Turn, download its result, "
                                            "fork branches that each run a Turn, delete them all.")
    p.add_argument("--address", default=os.environ.get("BERTH_ADMIN_ADDRESS", berth_client.DEFAULT_ADDRESS))
    p.add_argument("--token-file", default=os.environ.get("BERTH_ADMIN_TOKEN_FILE"),
                   help="the admin-token file (default $BERTH_ADMIN_TOKEN_FILE; else $BERTH_ADMIN_TOKEN holds the token)")
    p.add_argument("--project", default="", help="tenants/TENANT/projects/PROJECT (default: the default project)")
    p.add_argument("--display-name", default="agent-loop-example")
    p.add_argument("--input", default=DEFAULT_INPUT, help=f"the content of /workspace/{INPUT_PATH}")
    p.add_argument("--result", default="result.txt",
                   help="the file to download after the command, relative to /workspace ('' skips it)")
    p.add_argument("--shell", help="run this script with /bin/sh -c instead of the command")
    p.add_argument("--timeout", type=int, default=0, help="stop the command after this many seconds (default: Core's)")
    p.add_argument("--wait-timeout", type=float, default=300, help="seconds to wait for the Session")
    p.add_argument("--forks", type=int, default=2, help="branches to fork after the command (0: none)")
    p.add_argument("command", nargs="*", help=f"the command (default: /bin/sh -c '{DEFAULT_SCRIPT}')")
    args = p.parse_args()

    token = berth_client.read_token(args.token_file) if args.token_file else os.environ.get("BERTH_ADMIN_TOKEN")
    if not token:
        p.error("give --token-file, $BERTH_ADMIN_TOKEN_FILE or $BERTH_ADMIN_TOKEN")
    try:
        with berth_client.connect(args.address, token) as client:
            return run(client, args)
    except grpc.RpcError as err:
        reason = berth_client.error_reason(err) or err.code().name.lower()
        print(f"agent_loop: error: {reason}: {err.details()}", file=sys.stderr)
    except (Failed, ValueError, OSError) as err:
        print(f"agent_loop: error: {err}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
