from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Allocation(_message.Message):
    __slots__ = ["abandoned", "bootstrap_complete", "create_failed", "create_settled", "create_time", "generation", "name", "node", "project", "release_time", "session", "state"]
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    CREATE_FAILED_FIELD_NUMBER: _ClassVar[int]
    CREATE_SETTLED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STATE_ACTIVE: Allocation.State
    STATE_CLEANING_UP: Allocation.State
    STATE_CREATE_FAILED: Allocation.State
    STATE_CREATING: Allocation.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_PENDING: Allocation.State
    STATE_RELEASED: Allocation.State
    STATE_UNSPECIFIED: Allocation.State
    abandoned: bool
    bootstrap_complete: bool
    create_failed: bool
    create_settled: bool
    create_time: _timestamp_pb2.Timestamp
    generation: int
    name: str
    node: str
    project: str
    release_time: _timestamp_pb2.Timestamp
    session: str
    state: Allocation.State
    def __init__(self, name: _Optional[str] = ..., session: _Optional[str] = ..., node: _Optional[str] = ..., state: _Optional[_Union[Allocation.State, str]] = ..., generation: _Optional[int] = ..., create_settled: bool = ..., bootstrap_complete: bool = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., release_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., create_failed: bool = ..., abandoned: bool = ..., project: _Optional[str] = ...) -> None: ...

class GetAllocationRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetAllocationResponse(_message.Message):
    __slots__ = ["allocation"]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    allocation: Allocation
    def __init__(self, allocation: _Optional[_Union[Allocation, _Mapping]] = ...) -> None: ...

class ListAllocationsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "project", "show_released"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SHOW_RELEASED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    project: str
    show_released: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., show_released: bool = ..., project: _Optional[str] = ...) -> None: ...

class ListAllocationsResponse(_message.Message):
    __slots__ = ["allocations", "next_page_token"]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    allocations: _containers.RepeatedCompositeFieldContainer[Allocation]
    next_page_token: str
    def __init__(self, allocations: _Optional[_Iterable[_Union[Allocation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
