// An agent's loop over Berth's admin API: create a Session, wait until its
// Runtime accepts Turns, upload an input file, run one Turn streaming its
// output, download the file the Turn wrote, fork the Session into branches
// that each run a Turn of their own and give back a result, delete them
// all. It does what these berthctl commands do, with FileService's
// UploadFiles and DownloadFiles between them:
//
//   berthctl session create --wait
//   berthctl turn run SESSION -- CMD [ARG...]
//   berthctl session fork SESSION --count 2 --wait
//   berthctl session delete SESSION --wait
//
// Each branch (--forks, default 2; 0 skips the fork) starts with a copy of
// the Session's workspace; its Turn writes "branch-N" and the size of
// result.txt it found to branch.txt, which is downloaded from the branch
// and noted on stderr ("branch N: branch-N SIZE").
//
// The input (--input, default a line of text) becomes /workspace/input.txt;
// the command (default: cat input.txt; wc -c < input.txt > result.txt) runs
// in /workspace; when it completed, /workspace/result.txt (--result) is
// downloaded and written to stdout after the command's output (a command
// that wrote none is noted on stderr).
//
// Run it from clients/typescript (npm run example compiles it first):
//
//   BERTH_ADMIN_TOKEN_FILE=/var/lib/berth-core/admin-token npm run example
//   npm run example -- --input "$(date)" --shell 'tr a-z A-Z < input.txt > result.txt'
//
// It exits with the command's exit status; 124 when the Turn timed out, 130
// when it was cancelled (Ctrl-C cancels it), 1 when it failed or anything
// else went wrong.

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { type Session, Session_State } from "../src/gen/berth/admin/v1/session_pb.js";
import { type CommandSchema, OutputStream, type Turn, Turn_State } from "../src/gen/berth/admin/v1/turn_pb.js";
import {
  type AdminClient,
  connect,
  DEFAULT_ADDRESS,
  downloadFile,
  errorReason,
  readToken,
  uploadFile,
} from "../src/index.js";

const callTimeoutMs = 30_000; // every unary call (berthctl's bound)
const pollIntervalMs = 500; // between two reads of a Session being waited for
const streamRetries = 30; // reopenings of an output stream Core dropped, a second apart
const inputPath = "input.txt"; // where the input lands, relative to /workspace
const defaultInput = "hello from the agent loop\n";
const defaultScript = `cat ${inputPath}; wc -c < ${inputPath} > result.txt`;

/** The loop cannot go on; the message says why. */
class Failed extends Error {}

/** waitSession reads the Session until goal(session) is true and returns it. */
async function waitSession(
  client: AdminClient,
  name: string,
  timeoutMs: number,
  goal: (s: Session) => boolean,
): Promise<Session> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { session } = await client.sessions.getSession({ name }, { timeoutMs: callTimeoutMs });
    if (session === undefined) {
      throw new Failed(`GetSession returned no Session for ${name}`);
    }
    if (goal(session)) {
      return session;
    }
    if (Date.now() > deadline) {
      throw new Failed(`wait_timeout: ${name} is still ${Session_State[session.state]} after ${timeoutMs} ms`);
    }
    await sleep(pollIntervalMs);
  }
}

/** admitted is create --wait's goal: the Runtime accepts Turns. */
function admitted(s: Session): boolean {
  switch (s.state) {
    case Session_State.FAILED:
      throw new Failed(`${s.environment?.failureCode || "-"}: ${s.name} failed`);
    case Session_State.DELETING:
    case Session_State.DELETED:
      throw new Failed(`session_deleted: ${s.name} was deleted while waiting for it`);
  }
  return s.environment?.executionAdmitted ?? false;
}

/**
 * streamOutput writes the Turn's output to stdout and stderr until the
 * stream ends with the Turn. A stream Core dropped (Unavailable) is
 * reopened from the offsets already written, so every byte is written
 * once, in order.
 */
async function streamOutput(client: AdminClient, name: string): Promise<void> {
  const sent = new Map<OutputStream, bigint>([
    [OutputStream.STDOUT, 0n],
    [OutputStream.STDERR, 0n],
  ]);
  for (let retries = 0; ; retries++) {
    try {
      const stream = client.turns.streamTurnOutput(
        { name, stdoutOffset: sent.get(OutputStream.STDOUT), stderrOffset: sent.get(OutputStream.STDERR) },
        {}, // no deadline: it lasts as long as the Turn
      );
      for await (const chunk of stream) {
        retries = 0;
        const at = sent.get(chunk.stream);
        if (at === undefined) {
          continue;
        }
        // A reopened stream may repeat what was written.
        const skip = at > chunk.offset ? Number(at - chunk.offset) : 0;
        const data = chunk.data.subarray(Math.min(skip, chunk.data.length));
        if (data.length === 0) {
          continue;
        }
        sent.set(chunk.stream, chunk.offset + BigInt(chunk.data.length));
        (chunk.stream === OutputStream.STDERR ? process.stderr : process.stdout).write(data);
      }
      return;
    } catch (err) {
      const ce = ConnectError.from(err);
      if (ce.code !== Code.Unavailable || errorReason(ce) !== undefined || retries >= streamRetries) {
        throw err;
      }
      await sleep(1000);
    }
  }
}

/** outcome is the exit status for a terminal Turn, as berthctl's `turn run`. */
function outcome(turn: Turn): number {
  if (turn.state === Turn_State.COMPLETED) {
    return turn.exitCode >= 0 && turn.exitCode <= 255 ? turn.exitCode : 1;
  }
  const failure = turn.failureCode || "-";
  const [code, why]: [number, string] =
    turn.state === Turn_State.CANCELLED ? [130, "turn_cancelled: the Turn was cancelled"]
    : turn.state === Turn_State.TIMED_OUT ? [124, "turn_timed_out: the Turn ran past its timeout and was stopped"]
    : turn.state === Turn_State.FAILED ? [1, `${failure}: the Turn could not be run`]
    : turn.state === Turn_State.UNCONFIRMED ? [1, `${failure}: the Turn ran but its completion cannot be confirmed`]
    : [1, `turn_not_ended: the output ended while the Turn is ${Turn_State[turn.state]}`];
  console.error(`agent-loop: ${why}`);
  return code;
}

/**
 * downloadResult writes the file at path of the Session to stdout; a file
 * the command did not write is noted on stderr.
 */
async function downloadResult(client: AdminClient, name: string, path: string): Promise<void> {
  let data: Uint8Array;
  try {
    data = await downloadFile(client, name, path);
  } catch (err) {
    if (errorReason(err) !== "file_not_found") {
      throw err;
    }
    console.error(`agent-loop: the command wrote no ${path}`);
    return;
  }
  console.error(`agent-loop: downloaded ${path} (${data.length} bytes)`);
  await new Promise<void>((resolve, reject) => process.stdout.write(data, (e) => (e ? reject(e) : resolve())));
}

interface Options {
  project: string;
  displayName: string;
  input: string;
  result: string;
  shell?: string;
  timeoutSeconds: number;
  waitTimeoutMs: number;
  forks: number;
  command: string[];
}

/**
 * forkBranches forks the Session into o.forks branches, runs one Turn in
 * each and downloads what it wrote, then deletes the branches.
 */
async function forkBranches(client: AdminClient, name: string, o: Options): Promise<void> {
  const forked = await client.sessions.forkSession(
    { name, requestId: randomUUID(), count: o.forks, minCount: o.forks, displayNamePrefix: `${o.displayName}-branch` },
    { timeoutMs: callTimeoutMs },
  );
  const branches = forked.children.map((c) => c.name);
  console.error(`agent-loop: forked ${name} into ${branches.length} branches`);
  try {
    for (const [i, branch] of branches.entries()) {
      await waitSession(client, branch, o.waitTimeoutMs, admitted);
      const script = `printf 'branch-${i} %d\\n' "$(wc -c < result.txt)" > branch.txt`;
      const { turn } = await client.turns.submitTurn(
        { parent: branch, requestId: randomUUID(), turn: { command: { program: { case: "shellScript", value: script } } } },
        { timeoutMs: callTimeoutMs },
      );
      for await (const _ of client.turns.streamTurnOutput({ name: turn?.name ?? "" })) {
        // The branch's Turn prints nothing; the stream ends with it.
      }
      const data = await downloadFile(client, branch, "branch.txt");
      console.error(`agent-loop: branch ${i}: ${new TextDecoder().decode(data).trim()}`);
    }
  } finally {
    for (const branch of branches) {
      await client.sessions.deleteSession({ name: branch }, { timeoutMs: callTimeoutMs });
    }
    for (const branch of branches) {
      await waitSession(client, branch, o.waitTimeoutMs, (s) => s.state === Session_State.DELETED);
    }
  }
}

async function run(client: AdminClient, o: Options): Promise<number> {
  // 1. Create the Session. requestId makes a retry of this call idempotent.
  const created = await client.sessions.createSession(
    { requestId: randomUUID(), session: { displayName: o.displayName, project: o.project } },
    { timeoutMs: callTimeoutMs },
  );
  const name = created.session?.name ?? "";
  console.error(`agent-loop: created ${name}`);
  try {
    // 2. Wait until its Runtime accepts Turns.
    await waitSession(client, name, o.waitTimeoutMs, admitted);
    console.error(`agent-loop: ${name} admits Turns`);

    // 3. Upload the agent's input as one file (FILE_FORMAT_RAW), in chunks
    // of at most 1 MiB; uploadTar sends a whole tree.
    const up = await uploadFile(client, name, inputPath, new TextEncoder().encode(o.input), { mode: 0o644 });
    console.error(`agent-loop: uploaded ${inputPath} (${up.bytes} bytes)`);

    // 4. Run one Turn (in /workspace) and stream its output.
    const program: MessageInitShape<typeof CommandSchema>["program"] =
      o.shell !== undefined || o.command.length === 0
        ? { case: "shellScript", value: o.shell ?? defaultScript } // /bin/sh -c
        : { case: "argv", value: { args: o.command } }; // no shell, PATH lookup
    const { turn } = await client.turns.submitTurn(
      {
        parent: name,
        requestId: randomUUID(),
        turn: {
          command: { program },
          timeout: o.timeoutSeconds > 0 ? { seconds: BigInt(o.timeoutSeconds) } : undefined,
        },
      },
      { timeoutMs: callTimeoutMs },
    );
    const turnName = turn?.name ?? "";

    // Ctrl-C cancels the Turn; the stream then ends with it. A second
    // Ctrl-C stops waiting (and leaves the Session to its owner).
    let interrupted = false;
    const onInterrupt = () => {
      if (interrupted) {
        process.exit(130);
      }
      interrupted = true;
      console.error(`agent-loop: cancelling ${turnName}`);
      client.turns.cancelTurn({ name: turnName }, { timeoutMs: callTimeoutMs }).catch((err: unknown) => {
        console.error(`agent-loop: CancelTurn: ${ConnectError.from(err).message}`);
      });
    };
    process.on("SIGINT", onInterrupt);
    try {
      await streamOutput(client, turnName);
    } finally {
      process.off("SIGINT", onInterrupt);
    }
    const ended = await client.turns.getTurn({ name: turnName }, { timeoutMs: callTimeoutMs });
    if (ended.turn === undefined) {
      return 1;
    }

    // 5. Download what the command wrote (FILE_FORMAT_RAW).
    if (ended.turn.state === Turn_State.COMPLETED && o.result !== "") {
      await downloadResult(client, name, o.result);
    }

    // 6. Fork: branches that start from this workspace, each with its own
    // sandbox; their work never touches the Session's or each other's.
    if (ended.turn.state === Turn_State.COMPLETED && o.forks > 0) {
      await forkBranches(client, name, o);
    }
    return outcome(ended.turn);
  } finally {
    // 7. Delete the Session and wait until its cleanup is confirmed.
    await client.sessions.deleteSession({ name }, { timeoutMs: callTimeoutMs });
    await waitSession(client, name, o.waitTimeoutMs, (s) => s.state === Session_State.DELETED);
    console.error(`agent-loop: deleted ${name}`);
  }
}

/** snake turns a code name ("DeadlineExceeded") into a reason ("deadline_exceeded"). */
function snake(name: string): string {
  return name.replace(/(?<=.)([A-Z])/g, "_$1").toLowerCase();
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      address: { type: "string", default: process.env.BERTH_ADMIN_ADDRESS ?? DEFAULT_ADDRESS },
      "token-file": { type: "string", default: process.env.BERTH_ADMIN_TOKEN_FILE },
      project: { type: "string", default: "" },
      "display-name": { type: "string", default: "agent-loop-example" },
      input: { type: "string", default: defaultInput },
      result: { type: "string", default: "result.txt" },
      shell: { type: "string" },
      timeout: { type: "string", default: "0" },
      "wait-timeout": { type: "string", default: "300" },
      forks: { type: "string", default: "2" },
    },
  });
  const tokenFile = values["token-file"];
  try {
    const token = tokenFile ? readToken(tokenFile) : process.env.BERTH_ADMIN_TOKEN;
    if (!token) {
      console.error("agent-loop: give --token-file, $BERTH_ADMIN_TOKEN_FILE or $BERTH_ADMIN_TOKEN");
      return 2;
    }
    const client = connect(values.address, token);
    return await run(client, {
      project: values.project,
      displayName: values["display-name"],
      input: values.input,
      result: values.result,
      shell: values.shell,
      timeoutSeconds: Number(values.timeout),
      waitTimeoutMs: Number(values["wait-timeout"]) * 1000,
      forks: Number(values.forks),
      command: positionals,
    });
  } catch (err) {
    if (err instanceof Failed || !(err instanceof ConnectError)) {
      console.error(`agent-loop: error: ${err instanceof Error ? err.message : String(err)}`);
    } else {
      console.error(`agent-loop: error: ${errorReason(err) ?? snake(Code[err.code])}: ${err.rawMessage}`);
    }
    return 1;
  }
}

process.exitCode = await main();
