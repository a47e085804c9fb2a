from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

COMPUTE_PHASE_RESTORING: ComputePhase
COMPUTE_PHASE_RUNNING: ComputePhase
COMPUTE_PHASE_SUSPENDED: ComputePhase
COMPUTE_PHASE_SUSPENDING: ComputePhase
COMPUTE_PHASE_UNSPECIFIED: ComputePhase
DESCRIPTOR: _descriptor.FileDescriptor

class ArchiveSessionRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ArchiveSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["request_id", "session"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    session: Session
    def __init__(self, request_id: _Optional[str] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Environment(_message.Message):
    __slots__ = ["capabilities_prepared", "compute_available", "compute_phase", "compute_reason", "execution_admitted", "failure_code", "runtime_connected", "snapshot_expire_time"]
    CAPABILITIES_PREPARED_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_PHASE_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_REASON_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ADMITTED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    capabilities_prepared: bool
    compute_available: bool
    compute_phase: ComputePhase
    compute_reason: str
    execution_admitted: bool
    failure_code: str
    runtime_connected: bool
    snapshot_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, compute_available: bool = ..., runtime_connected: bool = ..., capabilities_prepared: bool = ..., execution_admitted: bool = ..., failure_code: _Optional[str] = ..., compute_reason: _Optional[str] = ..., compute_phase: _Optional[_Union[ComputePhase, str]] = ..., snapshot_expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ["count", "display_name_prefix", "min_count", "name", "request_id"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    count: int
    display_name_prefix: str
    min_count: int
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ..., count: _Optional[int] = ..., min_count: _Optional[int] = ..., display_name_prefix: _Optional[str] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ["capture_time", "children", "fork", "placed", "requested", "unplaced_reason"]
    CAPTURE_TIME_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    FORK_FIELD_NUMBER: _ClassVar[int]
    PLACED_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    UNPLACED_REASON_FIELD_NUMBER: _ClassVar[int]
    capture_time: _timestamp_pb2.Timestamp
    children: _containers.RepeatedCompositeFieldContainer[Session]
    fork: str
    placed: int
    requested: int
    unplaced_reason: str
    def __init__(self, fork: _Optional[str] = ..., children: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., requested: _Optional[int] = ..., placed: _Optional[int] = ..., unplaced_reason: _Optional[str] = ..., capture_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "project", "show_deleted"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SHOW_DELETED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    project: str
    show_deleted: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., show_deleted: bool = ..., project: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ResumeSessionRequest(_message.Message):
    __slots__ = ["name", "request_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResumeSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["allocation", "create_time", "delete_time", "display_name", "environment", "name", "node", "project", "state"]
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DELETE_TIME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_ACTIVE: Session.State
    STATE_ARCHIVED: Session.State
    STATE_DELETED: Session.State
    STATE_DELETING: Session.State
    STATE_FAILED: Session.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_PROVISIONING: Session.State
    STATE_UNSPECIFIED: Session.State
    allocation: str
    create_time: _timestamp_pb2.Timestamp
    delete_time: _timestamp_pb2.Timestamp
    display_name: str
    environment: Environment
    name: str
    node: str
    project: str
    state: Session.State
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., state: _Optional[_Union[Session.State, str]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., delete_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., environment: _Optional[_Union[Environment, _Mapping]] = ..., node: _Optional[str] = ..., allocation: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class SuspendSessionRequest(_message.Message):
    __slots__ = ["name", "request_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class SuspendSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ComputePhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
