// Connect to Berth's admin API (berth.admin.v1) from TypeScript on Node.
//
// The messages and service descriptors are generated (src/gen/, by
// protoc-gen-es; scripts/gen-clients). This file is the small hand-written
// part:
//
//   const client = connect("127.0.0.1:7700", readToken(path));
//   const { session } = await client.sessions.getSession({ name: "sessions/..." });
//
// uploadFile, downloadFile, uploadTar and downloadTar move files in and out
// of a Session's /workspace through FileService, in chunks of at most 1 MiB.
//
// Core serves the admin API as plaintext gRPC on a loopback address only,
// so connect refuses any other address (reach a remote Core through a
// tunnel: ssh -L 7700:127.0.0.1:7700 HOST). Every call carries the token
// as "authorization: Bearer <token>". The token may be the administrator's
// (berth-core's admin-token file) or a project API key.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";

import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { AllocationService } from "./gen/berth/admin/v1/allocation_pb.js";
import { AuditService } from "./gen/berth/admin/v1/audit_pb.js";
import { DeploymentService } from "./gen/berth/admin/v1/deployment_pb.js";
import {
  FileFormat,
  FileService,
  type UploadFilesRequestSchema,
  type UploadFilesResponse,
  type UploadHeaderSchema,
} from "./gen/berth/admin/v1/file_pb.js";
import { InstallationService } from "./gen/berth/admin/v1/installation_pb.js";
import { NodeService } from "./gen/berth/admin/v1/node_pb.js";
import { ProjectService } from "./gen/berth/admin/v1/project_pb.js";
import { SessionService } from "./gen/berth/admin/v1/session_pb.js";
import { TurnService } from "./gen/berth/admin/v1/turn_pb.js";

/** Core's default admin address. */
export const DEFAULT_ADDRESS = "127.0.0.1:7700";
/** The admin server's bound on a request (a Turn's stdin must fit in it); used both ways. */
export const MAX_MESSAGE_BYTES = 4 << 20;
/** The google.rpc.ErrorInfo domain of the admin API's errors. */
export const ERROR_DOMAIN = "admin.berth.dev";
/** FileService's bound on one data message, both ways. */
export const CHUNK_BYTES = 1 << 20;
/** The bound on a whole upload or download unless the call gives its own. */
export const FILE_TIMEOUT_MS = 300_000;

/** One client per admin service, over one HTTP/2 connection. */
export interface AdminClient {
  installation: Client<typeof InstallationService>;
  deployments: Client<typeof DeploymentService>;
  nodes: Client<typeof NodeService>;
  sessions: Client<typeof SessionService>;
  allocations: Client<typeof AllocationService>;
  turns: Client<typeof TurnService>;
  projects: Client<typeof ProjectService>;
  audit: Client<typeof AuditService>;
  files: Client<typeof FileService>;
}

/**
 * readToken returns the token held in the file at path: one line,
 * surrounding white space ignored. Errors name the file, never its content.
 */
export function readToken(path: string): string {
  const raw = readFileSync(path);
  const token = raw.toString("latin1").trim();
  if (raw.length > 4096 || token === "" || !/^[\x21-\x7e]+$/.test(token)) {
    throw new Error(`${path} does not hold one token line`);
  }
  return token;
}

/** checkAddress throws unless address is HOST:PORT with a loopback HOST. */
export function checkAddress(address: string): void {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(address);
  if (m === null) {
    throw new Error(`admin API address ${JSON.stringify(address)} is not HOST:PORT`);
  }
  const host = m[1] ?? m[2] ?? "";
  const loopback =
    host === "localhost" ||
    (isIP(host) === 4 && host.startsWith("127.")) ||
    (isIP(host) === 6 && new URL(`http://[${host}]/`).hostname === "[::1]");
  if (!loopback) {
    throw new Error(
      "the admin API is plaintext and listens on loopback only: reach a remote Core through a tunnel to a local port",
    );
  }
}

/** bearer adds "authorization: Bearer <token>" to every call. */
export function bearer(token: string): Interceptor {
  return (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * connect returns the admin clients for the API at address (loopback only,
 * plaintext gRPC over HTTP/2) with the bearer token. It connects at the
 * first call; an idle connection does not keep Node running.
 */
export function connect(address: string, token: string): AdminClient {
  checkAddress(address);
  const transport = createGrpcTransport({
    baseUrl: `http://${address}`,
    interceptors: [bearer(token)],
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
  });
  return {
    installation: createClient(InstallationService, transport),
    deployments: createClient(DeploymentService, transport),
    nodes: createClient(NodeService, transport),
    sessions: createClient(SessionService, transport),
    allocations: createClient(AllocationService, transport),
    turns: createClient(TurnService, transport),
    projects: createClient(ProjectService, transport),
    audit: createClient(AuditService, transport),
    files: createClient(FileService, transport),
  };
}

/**
 * errorReason returns the admin API's fixed reason of a failed call
 * ("session_busy", "not_found", ...; the google.rpc.ErrorInfo of domain
 * admin.berth.dev), or undefined when the error does not carry one (for
 * example the transport's Unavailable before Core answered).
 */
export function errorReason(err: unknown): string | undefined {
  for (const detail of ConnectError.from(err).details) {
    if (!("type" in detail) || detail.type !== "google.rpc.ErrorInfo") {
      continue;
    }
    // ErrorInfo: reason = 1, domain = 2 (metadata = 3 is skipped).
    const r = new BinaryReader(detail.value);
    let reason = "";
    let domain = "";
    while (r.pos < r.len) {
      const [field, wireType] = r.tag();
      if (field === 1 && wireType === WireType.LengthDelimited) {
        reason = r.string();
      } else if (field === 2 && wireType === WireType.LengthDelimited) {
        domain = r.string();
      } else {
        r.skip(wireType, field);
      }
    }
    if (domain === ERROR_DOMAIN && reason !== "") {
      return reason;
    }
  }
  return undefined;
}

/** Options of an upload. */
export interface UploadOptions {
  /** A raw file's permission bits; 0 (the default) means 0644. */
  mode?: number;
  /** Refuse an entry whose name exists (file_exists). */
  noOverwrite?: boolean;
  /** A UUID naming the upload; the default makes one per call (a retry after Unavailable needs a new one). */
  requestId?: string;
  timeoutMs?: number;
}

async function upload(
  client: AdminClient,
  header: MessageInitShape<typeof UploadHeaderSchema>,
  data: Uint8Array,
  timeoutMs: number | undefined,
): Promise<UploadFilesResponse> {
  async function* requests(): AsyncIterable<MessageInitShape<typeof UploadFilesRequestSchema>> {
    yield { message: { case: "header", value: header } };
    for (let at = 0; at < data.length; at += CHUNK_BYTES) {
      yield { message: { case: "data", value: data.subarray(at, at + CHUNK_BYTES) } };
    }
  }
  return client.files.uploadFiles(requests(), { timeoutMs: timeoutMs ?? FILE_TIMEOUT_MS });
}

/**
 * uploadFile writes data as one regular file at path (relative to
 * /workspace, or absolute under it) of the Session named session
 * ("sessions/..."), replacing it atomically: FileService.UploadFiles with
 * FILE_FORMAT_RAW.
 */
export function uploadFile(
  client: AdminClient,
  session: string,
  path: string,
  data: Uint8Array,
  o: UploadOptions = {},
): Promise<UploadFilesResponse> {
  const header = {
    name: session,
    requestId: o.requestId ?? randomUUID(),
    path,
    format: FileFormat.RAW,
    mode: o.mode ?? 0,
    noOverwrite: o.noOverwrite ?? false,
    size: BigInt(data.length),
  };
  return upload(client, header, data, o.timeoutMs);
}

/**
 * uploadTar extracts archive (a tar) under the directory path of the
 * Session (created when missing): FileService.UploadFiles with
 * FILE_FORMAT_TAR.
 */
export function uploadTar(
  client: AdminClient,
  session: string,
  path: string,
  archive: Uint8Array,
  o: Omit<UploadOptions, "mode"> = {},
): Promise<UploadFilesResponse> {
  const header = {
    name: session,
    requestId: o.requestId ?? randomUUID(),
    path,
    format: FileFormat.TAR,
    noOverwrite: o.noOverwrite ?? false,
  };
  return upload(client, header, archive, o.timeoutMs);
}

async function download(
  client: AdminClient,
  session: string,
  path: string,
  format: FileFormat,
  timeoutMs: number | undefined,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let header = false;
  const stream = client.files.downloadFiles(
    { name: session, path, format },
    { timeoutMs: timeoutMs ?? FILE_TIMEOUT_MS },
  );
  for await (const m of stream) {
    if (m.message.case === "header") {
      header = true;
    } else if (m.message.case === "data") {
      parts.push(m.message.value);
    }
  }
  if (!header) {
    throw new Error(`DownloadFiles of ${JSON.stringify(path)} sent no header`);
  }
  return Buffer.concat(parts);
}

/**
 * downloadFile returns the bytes of the regular file at path (relative to
 * /workspace, or absolute under it) of the Session: FileService.
 * DownloadFiles with FILE_FORMAT_RAW. A missing file throws a ConnectError
 * with reason file_not_found; a directory, not_a_regular_file.
 */
export function downloadFile(client: AdminClient, session: string, path: string, timeoutMs?: number): Promise<Uint8Array> {
  return download(client, session, path, FileFormat.RAW, timeoutMs);
}

/**
 * downloadTar returns the file or tree at path of the Session ("" is the
 * whole workspace) as a tar archive: FileService.DownloadFiles with
 * FILE_FORMAT_TAR. Symlinks come as links.
 */
export function downloadTar(client: AdminClient, session: string, path = "", timeoutMs?: number): Promise<Uint8Array> {
  return download(client, session, path, FileFormat.TAR, timeoutMs);
}
