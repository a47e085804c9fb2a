// Command berthctl is the admin CLI of a Berth installation, built on the
// generated client of berth.admin.v1:
//
//	berthctl login --address HOST:PORT --token-file PATH   check and store where the admin API is
//	berthctl installation get                              the installation: id, public URL, owner epoch, version
//	berthctl node token create|list|revoke                 enrollment tokens
//	berthctl node list|get|enable|retire|remove            nodes
//	berthctl deployment get|preview|commit|replace         the provider and its specification
//	berthctl deployment disable|enable                     stop and resume Session creation (the provider switch)
//	berthctl session create|list|get|delete|archive        Sessions (create and delete --wait)
//	berthctl session suspend|resume                        suspend an idle Session now, resume it (--wait)
//	berthctl turn run SESSION -- CMD [ARG...]              run a command, stream its output, exit with its status
//	berthctl turn list|get|cancel                          Turns
//	berthctl cp SRC DST                                    copy files to or from sessions/<id>:<path> (FileService)
//	berthctl alloc list|get                                allocations (read-only)
//	berthctl tenant create|list|get|update|delete          tenants
//	berthctl project create|list|get|update|limits|delete  a tenant's projects (--tenant)
//	berthctl key create|list|revoke                        a project's API keys (token shown once)
//	berthctl audit list                                    the audit trail (--since, --project, --actor, --action, ...)
//
// Rules:
//   - The admin token never appears in argv, output or the config file:
//     commands read it from the token file whose path login stored (or
//     --token-file, $BERTH_ADMIN_TOKEN_FILE), through internal/adminclient,
//     which also refuses an admin address off loopback.
//   - A deployment's provider credential (E2B's API key) never appears
//     in argv or an error: it comes from -f's candidate or
//     --credential-file, a file or stdin, and a file that does not parse
//     is named, never quoted.
//   - Tables (text/tabwriter) are for people; -o json prints the API's
//     response message as protojson for scripts (a listing read across
//     pages as one response of its type). Only a command that waits or
//     copies draws a progress line, on stderr, and only when stderr is a
//     terminal.
//   - cp trusts neither side's tree: it reads a local directory with
//     filexfer.Walk (links kept as links, never followed) and extracts a
//     download with a filexfer.Writer rooted at the local directory, the
//     confinement the Runtime applies to an upload, so a hostile Runtime's
//     archive cannot write outside it.
//   - One constructor per subcommand ((*app).sessionCreateCmd, ...); every
//     unary call goes through call (main.go): the one connection dialled
//     and authenticated at the first call, the callTimeout deadline, and
//     the error decoded once through the admin API's errgrpc codec
//     (adminclient.Decode, admin.Decode) into an errdefs class with
//     Core's fixed reason and message.
//   - Exit status: 0; 1 for an error, printed as "error: <reason>: <message>"
//     with the admin API's fixed reason (adminclient.Describe); 2 for a
//     command line berthctl cannot run; `turn run` exits with the
//     command's status, 130 when the Turn was cancelled (Ctrl-C cancels it
//     with CancelTurn), 124 when it timed out.
//   - Every mutation that could be duplicated by a retry sends a
//     request_id (--request-id, default a new UUID); berthctl itself never
//     retries a mutation. Only `turn run` reopens the output stream after
//     Core dropped it, from the offsets it has written.
package main
