"""Connect to Berth's admin API (berth.admin.v1) from Python.

The stubs and messages are generated (berth/admin/v1/*_pb2.py, *_pb2_grpc.py;
scripts/gen-clients). This module is the small hand-written part:

    import berth_client
    from berth.admin.v1 import session_pb2

    client = berth_client.connect("127.0.0.1:7700", berth_client.read_token(path))
    resp = client.sessions.GetSession(session_pb2.GetSessionRequest(name="sessions/..."), timeout=30)
    client.close()

upload_file, download_file, upload_tar and download_tar move files in and
out of a Session's /workspace through FileService, in chunks of at most
1 MiB.

Core serves the admin API as plaintext gRPC on a loopback address only, so
connect refuses any other address (reach a remote Core through a tunnel:
ssh -L 7700:127.0.0.1:7700 HOST). Every call carries the token as
"authorization: Bearer <token>" metadata. The token may be the
administrator's (berth-core's admin-token file) or a project API key.
"""

import ipaddress
import uuid

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from berth.admin.v1 import (
    allocation_pb2_grpc,
    audit_pb2_grpc,
    deployment_pb2_grpc,
    file_pb2,
    file_pb2_grpc,
    installation_pb2_grpc,
    node_pb2_grpc,
    project_pb2_grpc,
    session_pb2_grpc,
    turn_pb2_grpc,
)

__all__ = ["CHUNK_BYTES", "DEFAULT_ADDRESS", "ERROR_DOMAIN", "FILE_TIMEOUT", "MAX_MESSAGE_BYTES", "Client", "connect",
           "download_file", "download_tar", "error_reason", "read_token", "upload_file", "upload_tar"]

# DEFAULT_ADDRESS is Core's default admin address.
DEFAULT_ADDRESS = "127.0.0.1:7700"
# MAX_MESSAGE_BYTES is the admin server's bound on a request (a Turn's stdin
# must fit in it); berthctl uses it both ways.
MAX_MESSAGE_BYTES = 4 << 20
# ERROR_DOMAIN is the google.rpc.ErrorInfo domain of the admin API's errors.
ERROR_DOMAIN = "admin.berth.dev"
# CHUNK_BYTES is the FileService's bound on one data message, both ways.
CHUNK_BYTES = 1 << 20
# FILE_TIMEOUT bounds a whole upload or download (seconds) unless the call
# gives its own.
FILE_TIMEOUT = 300


def read_token(path):
    """Returns the token held in the file at path: one line, surrounding
    white space ignored. Errors name the file, never its content."""
    with open(path, "rb") as f:
        raw = f.read(4097)
    token = raw.strip()
    if len(raw) > 4096 or not token or any(c <= 0x20 or c >= 0x7F for c in token):
        raise ValueError(f"{path} does not hold one token line")
    return token.decode("ascii")


def check_address(address):
    """Raises ValueError unless address is HOST:PORT with a loopback HOST."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"admin API address {address!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError("the admin API is plaintext and listens on loopback only: "
                         "reach a remote Core through a tunnel to a local port")


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds "authorization: Bearer <token>" to every call's metadata."""

    def __init__(self, token):
        self._header = ("authorization", "Bearer " + token)

    def _details(self, d):
        return _CallDetails(d.method, d.timeout, list(d.metadata or ()) + [self._header],
                            d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


class Client:
    """One stub per admin service over one channel; close() closes it."""

    def __init__(self, channel):
        self.channel = channel
        self.installation = installation_pb2_grpc.InstallationServiceStub(channel)
        self.deployments = deployment_pb2_grpc.DeploymentServiceStub(channel)
        self.nodes = node_pb2_grpc.NodeServiceStub(channel)
        self.sessions = session_pb2_grpc.SessionServiceStub(channel)
        self.allocations = allocation_pb2_grpc.AllocationServiceStub(channel)
        self.turns = turn_pb2_grpc.TurnServiceStub(channel)
        self.projects = project_pb2_grpc.ProjectServiceStub(channel)
        self.audit = audit_pb2_grpc.AuditServiceStub(channel)
        self.files = file_pb2_grpc.FileServiceStub(channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(address, token):
    """Returns a Client whose calls go to the admin API at address (loopback
    only, plaintext) with the bearer token. It connects at the first call."""
    check_address(address)
    channel = grpc.insecure_channel(address, options=[
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.primary_user_agent", "berth-client-python"),
    ])
    return Client(grpc.intercept_channel(channel, _Bearer(token)))


def _upload(client, header, data, timeout):
    def requests():
        yield file_pb2.UploadFilesRequest(header=header)
        view = memoryview(data)
        for at in range(0, len(view), CHUNK_BYTES):
            yield file_pb2.UploadFilesRequest(data=bytes(view[at:at + CHUNK_BYTES]))
    return client.files.UploadFiles(requests(), timeout=timeout)


def upload_file(client, session, path, data, mode=0, no_overwrite=False, request_id=None, timeout=FILE_TIMEOUT):
    """Writes data (bytes) as one regular file at path (relative to
    /workspace, or absolute under it) of the Session named session
    ("sessions/..."), replacing it atomically: FileService.UploadFiles with
    FILE_FORMAT_RAW. mode is its permission bits (0: 0644). Returns the
    UploadFilesResponse. A retry after UNAVAILABLE needs a new request_id
    (the default makes one per call)."""
    header = file_pb2.UploadHeader(name=session, request_id=request_id or str(uuid.uuid4()), path=path,
                                   format=file_pb2.FILE_FORMAT_RAW, mode=mode, no_overwrite=no_overwrite,
                                   size=len(data))
    return _upload(client, header, data, timeout)


def upload_tar(client, session, path, archive, no_overwrite=False, request_id=None, timeout=FILE_TIMEOUT):
    """Extracts archive (a tar, as bytes) under the directory path of the
    Session (created when missing): FileService.UploadFiles with
    FILE_FORMAT_TAR. Returns the UploadFilesResponse."""
    header = file_pb2.UploadHeader(name=session, request_id=request_id or str(uuid.uuid4()), path=path,
                                   format=file_pb2.FILE_FORMAT_TAR, no_overwrite=no_overwrite)
    return _upload(client, header, archive, timeout)


def _download(client, session, path, fmt, timeout):
    out = bytearray()
    header = None
    for m in client.files.DownloadFiles(file_pb2.DownloadFilesRequest(name=session, path=path, format=fmt),
                                        timeout=timeout):
        if m.WhichOneof("message") == "header":
            header = m.header
        else:
            out += m.data
    if header is None:
        raise ValueError(f"DownloadFiles of {path!r} sent no header")
    return bytes(out)


def download_file(client, session, path, timeout=FILE_TIMEOUT):
    """Returns the bytes of the regular file at path (relative to
    /workspace, or absolute under it) of the Session: FileService.
    DownloadFiles with FILE_FORMAT_RAW. A missing file raises grpc.RpcError
    with reason file_not_found; a directory, not_a_regular_file."""
    return _download(client, session, path, file_pb2.FILE_FORMAT_RAW, timeout)


def download_tar(client, session, path="", timeout=FILE_TIMEOUT):
    """Returns the file or tree at path of the Session ("" is the whole
    workspace) as a tar archive (bytes; read it with tarfile): FileService.
    DownloadFiles with FILE_FORMAT_TAR. Symlinks come as links."""
    return _download(client, session, path, file_pb2.FILE_FORMAT_TAR, timeout)


def _status_classes():
    # google.rpc.Status and ErrorInfo are not in python3-protobuf: describe
    # just the fields read here, in a private pool, under a private package
    # (no clash with googleapis-common-protos when both are imported).
    f = descriptor_pb2.FileDescriptorProto(name="berth_client/status.proto", package="berth_client.rpc", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name, *fields):
        m = f.message_type.add(name=name)
        for number, fname, ftype, label, type_name in fields:
            field = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                field.type_name = type_name

    one, many = T.LABEL_OPTIONAL, T.LABEL_REPEATED
    msg("Any", (1, "type_url", T.TYPE_STRING, one, None), (2, "value", T.TYPE_BYTES, one, None))
    msg("Status", (1, "code", T.TYPE_INT32, one, None), (2, "message", T.TYPE_STRING, one, None),
        (3, "details", T.TYPE_MESSAGE, many, ".berth_client.rpc.Any"))
    msg("ErrorInfo", (1, "reason", T.TYPE_STRING, one, None), (2, "domain", T.TYPE_STRING, one, None))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    return (factory.GetPrototype(pool.FindMessageTypeByName("berth_client.rpc.Status")),
            factory.GetPrototype(pool.FindMessageTypeByName("berth_client.rpc.ErrorInfo")))


_Status, _ErrorInfo = _status_classes()


def error_reason(err):
    """Returns the admin API's fixed reason of a failed call's grpc.RpcError
    ("session_busy", "not_found", ...; the ErrorInfo of domain
    admin.berth.dev), or None when the error does not carry one (for
    example the transport's UNAVAILABLE before Core answered)."""
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        for detail in _Status.FromString(value).details:
            if detail.type_url.rpartition("/")[2] == "google.rpc.ErrorInfo":
                info = _ErrorInfo.FromString(detail.value)
                if info.domain == ERROR_DOMAIN:
                    return info.reason
    return None
