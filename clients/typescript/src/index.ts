// Connect to Berth's admin API (berth.admin.v1) from TypeScript on Node.
//
// The messages and service descriptors are generated (src/gen/, by
// protoc-gen-es; scripts/gen-clients). This file is the small hand-written
// part:
//
//   const client = connect("127.0.0.1:7700", readToken(path));
//   const { session } = await client.sessions.getSession({ name: "sessions/..." });
//
// Core serves the admin API as plaintext gRPC on a loopback address only,
// so connect refuses any other address (reach a remote Core through a
// tunnel: ssh -L 7700:127.0.0.1:7700 HOST). Every call carries the token
// as "authorization: Bearer <token>". The token may be the administrator's
// (berth-core's admin-token file) or a project API key.

import { readFileSync } from "node:fs";
import { isIP } from "node:net";

import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { AllocationService } from "./gen/berth/admin/v1/allocation_pb.js";
import { AuditService } from "./gen/berth/admin/v1/audit_pb.js";
import { DeploymentService } from "./gen/berth/admin/v1/deployment_pb.js";
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
