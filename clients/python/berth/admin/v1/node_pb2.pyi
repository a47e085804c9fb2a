from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AbandonedAllocation(_message.Message):
    __slots__ = ["allocation", "incarnations", "session", "snapshots"]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    INCARNATIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    allocation: str
    incarnations: int
    session: str
    snapshots: int
    def __init__(self, allocation: _Optional[str] = ..., session: _Optional[str] = ..., snapshots: _Optional[int] = ..., incarnations: _Optional[int] = ...) -> None: ...

class Capacity(_message.Message):
    __slots__ = ["active", "cpu_millis", "creation_receipts_held", "disk_free_bytes", "max_active", "max_retained", "memory_bytes", "no_room_reason", "retained"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLIS_FIELD_NUMBER: _ClassVar[int]
    CREATION_RECEIPTS_HELD_FIELD_NUMBER: _ClassVar[int]
    DISK_FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    MAX_RETAINED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    NO_ROOM_REASON_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    active: int
    cpu_millis: int
    creation_receipts_held: int
    disk_free_bytes: int
    max_active: int
    max_retained: int
    memory_bytes: int
    no_room_reason: str
    retained: int
    def __init__(self, cpu_millis: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., disk_free_bytes: _Optional[int] = ..., max_active: _Optional[int] = ..., max_retained: _Optional[int] = ..., active: _Optional[int] = ..., retained: _Optional[int] = ..., no_room_reason: _Optional[str] = ..., creation_receipts_held: _Optional[int] = ...) -> None: ...

class CreateEnrollmentTokenRequest(_message.Message):
    __slots__ = ["request_id", "ttl"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, request_id: _Optional[str] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateEnrollmentTokenResponse(_message.Message):
    __slots__ = ["enrollment_token", "token_text"]
    ENROLLMENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_TEXT_FIELD_NUMBER: _ClassVar[int]
    enrollment_token: EnrollmentToken
    token_text: str
    def __init__(self, enrollment_token: _Optional[_Union[EnrollmentToken, _Mapping]] = ..., token_text: _Optional[str] = ...) -> None: ...

class EnableNodeRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class EnableNodeResponse(_message.Message):
    __slots__ = ["node"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class EnrollmentToken(_message.Message):
    __slots__ = ["create_time", "expire_time", "name", "node", "revoke_time", "state", "use_time"]
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_ACTIVE: EnrollmentToken.State
    STATE_EXPIRED: EnrollmentToken.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REVOKED: EnrollmentToken.State
    STATE_UNSPECIFIED: EnrollmentToken.State
    STATE_USED: EnrollmentToken.State
    USE_TIME_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    name: str
    node: str
    revoke_time: _timestamp_pb2.Timestamp
    state: EnrollmentToken.State
    use_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[EnrollmentToken.State, str]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., use_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., node: _Optional[str] = ...) -> None: ...

class GetNodeRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetNodeResponse(_message.Message):
    __slots__ = ["node"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class ListEnrollmentTokensRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "show_inactive"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SHOW_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    show_inactive: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., show_inactive: bool = ...) -> None: ...

class ListEnrollmentTokensResponse(_message.Message):
    __slots__ = ["enrollment_tokens", "next_page_token"]
    ENROLLMENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    enrollment_tokens: _containers.RepeatedCompositeFieldContainer[EnrollmentToken]
    next_page_token: str
    def __init__(self, enrollment_tokens: _Optional[_Iterable[_Union[EnrollmentToken, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "show_removed"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SHOW_REMOVED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    show_removed: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., show_removed: bool = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ["next_page_token", "nodes"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ["advertise_address", "backend_fingerprint", "capacity", "enroll_time", "enrollment_token", "id", "name", "presence", "readiness", "state"]
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ADVERTISE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ENROLLMENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENROLL_TIME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    READINESS_FIELD_NUMBER: _ClassVar[int]
    STATE_ENABLED: Node.State
    STATE_ENROLLED: Node.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REMOVED: Node.State
    STATE_RETIRED: Node.State
    STATE_UNSPECIFIED: Node.State
    advertise_address: str
    backend_fingerprint: str
    capacity: Capacity
    enroll_time: _timestamp_pb2.Timestamp
    enrollment_token: str
    id: str
    name: str
    presence: Presence
    readiness: Readiness
    state: Node.State
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., advertise_address: _Optional[str] = ..., state: _Optional[_Union[Node.State, str]] = ..., presence: _Optional[_Union[Presence, _Mapping]] = ..., readiness: _Optional[_Union[Readiness, _Mapping]] = ..., capacity: _Optional[_Union[Capacity, _Mapping]] = ..., enroll_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., enrollment_token: _Optional[str] = ..., backend_fingerprint: _Optional[str] = ...) -> None: ...

class NodeAbandon(_message.Message):
    __slots__ = ["backend_fingerprint"]
    BACKEND_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    backend_fingerprint: str
    def __init__(self, backend_fingerprint: _Optional[str] = ...) -> None: ...

class NodeAbandonment(_message.Message):
    __slots__ = ["abandon_time", "allocations", "backend_fingerprint", "reservations"]
    ABANDON_TIME_FIELD_NUMBER: _ClassVar[int]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    abandon_time: _timestamp_pb2.Timestamp
    allocations: _containers.RepeatedCompositeFieldContainer[AbandonedAllocation]
    backend_fingerprint: str
    reservations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, backend_fingerprint: _Optional[str] = ..., abandon_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., allocations: _Optional[_Iterable[_Union[AbandonedAllocation, _Mapping]]] = ..., reservations: _Optional[_Iterable[str]] = ...) -> None: ...

class Presence(_message.Message):
    __slots__ = ["connected", "last_report_time"]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LAST_REPORT_TIME_FIELD_NUMBER: _ClassVar[int]
    connected: bool
    last_report_time: _timestamp_pb2.Timestamp
    def __init__(self, connected: bool = ..., last_report_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Readiness(_message.Message):
    __slots__ = ["check_time", "diagnostic_code", "generation", "ready"]
    CHECK_TIME_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTIC_CODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    check_time: _timestamp_pb2.Timestamp
    diagnostic_code: str
    generation: int
    ready: bool
    def __init__(self, generation: _Optional[int] = ..., ready: bool = ..., diagnostic_code: _Optional[str] = ..., check_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ["abandon", "name"]
    ABANDON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    abandon: NodeAbandon
    name: str
    def __init__(self, name: _Optional[str] = ..., abandon: _Optional[_Union[NodeAbandon, _Mapping]] = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = ["abandonment", "node"]
    ABANDONMENT_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    abandonment: NodeAbandonment
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ..., abandonment: _Optional[_Union[NodeAbandonment, _Mapping]] = ...) -> None: ...

class RetireNodeRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetireNodeResponse(_message.Message):
    __slots__ = ["node"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: Node
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class RevokeEnrollmentTokenRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RevokeEnrollmentTokenResponse(_message.Message):
    __slots__ = ["enrollment_token"]
    ENROLLMENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    enrollment_token: EnrollmentToken
    def __init__(self, enrollment_token: _Optional[_Union[EnrollmentToken, _Mapping]] = ...) -> None: ...
