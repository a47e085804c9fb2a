from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OUTPUT_STREAM_STDERR: OutputStream
OUTPUT_STREAM_STDOUT: OutputStream
OUTPUT_STREAM_UNSPECIFIED: OutputStream

class Argv(_message.Message):
    __slots__ = ["args"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, args: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelTurnRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CancelTurnResponse(_message.Message):
    __slots__ = ["turn"]
    TURN_FIELD_NUMBER: _ClassVar[int]
    turn: Turn
    def __init__(self, turn: _Optional[_Union[Turn, _Mapping]] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ["argv", "shell_script"]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    SHELL_SCRIPT_FIELD_NUMBER: _ClassVar[int]
    argv: Argv
    shell_script: str
    def __init__(self, argv: _Optional[_Union[Argv, _Mapping]] = ..., shell_script: _Optional[str] = ...) -> None: ...

class GetTurnRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetTurnResponse(_message.Message):
    __slots__ = ["turn"]
    TURN_FIELD_NUMBER: _ClassVar[int]
    turn: Turn
    def __init__(self, turn: _Optional[_Union[Turn, _Mapping]] = ...) -> None: ...

class ListTurnsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTurnsResponse(_message.Message):
    __slots__ = ["next_page_token", "turns"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    turns: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StreamTurnOutputRequest(_message.Message):
    __slots__ = ["name", "stderr_offset", "stdout_offset"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STDERR_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STDOUT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    name: str
    stderr_offset: int
    stdout_offset: int
    def __init__(self, name: _Optional[str] = ..., stdout_offset: _Optional[int] = ..., stderr_offset: _Optional[int] = ...) -> None: ...

class StreamTurnOutputResponse(_message.Message):
    __slots__ = ["data", "offset", "stream"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    stream: OutputStream
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class SubmitTurnRequest(_message.Message):
    __slots__ = ["parent", "request_id", "turn"]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    parent: str
    request_id: str
    turn: Turn
    def __init__(self, parent: _Optional[str] = ..., request_id: _Optional[str] = ..., turn: _Optional[_Union[Turn, _Mapping]] = ...) -> None: ...

class SubmitTurnResponse(_message.Message):
    __slots__ = ["turn"]
    TURN_FIELD_NUMBER: _ClassVar[int]
    turn: Turn
    def __init__(self, turn: _Optional[_Union[Turn, _Mapping]] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ["cancel_time", "command", "create_time", "end_time", "env", "exit_code", "failure_code", "name", "output_truncated", "queue_timeout", "signal", "start_time", "state", "stderr_bytes", "stdin", "stdout_bytes", "timeout", "working_directory"]
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CANCEL_TIME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_CANCELLED: Turn.State
    STATE_COMPLETED: Turn.State
    STATE_FAILED: Turn.State
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_QUEUED: Turn.State
    STATE_RUNNING: Turn.State
    STATE_TIMED_OUT: Turn.State
    STATE_UNCONFIRMED: Turn.State
    STATE_UNSPECIFIED: Turn.State
    STDERR_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDOUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    cancel_time: _timestamp_pb2.Timestamp
    command: Command
    create_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    env: _containers.ScalarMap[str, str]
    exit_code: int
    failure_code: str
    name: str
    output_truncated: bool
    queue_timeout: _duration_pb2.Duration
    signal: int
    start_time: _timestamp_pb2.Timestamp
    state: Turn.State
    stderr_bytes: int
    stdin: bytes
    stdout_bytes: int
    timeout: _duration_pb2.Duration
    working_directory: str
    def __init__(self, name: _Optional[str] = ..., command: _Optional[_Union[Command, _Mapping]] = ..., working_directory: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., stdin: _Optional[bytes] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., state: _Optional[_Union[Turn.State, str]] = ..., exit_code: _Optional[int] = ..., stdout_bytes: _Optional[int] = ..., stderr_bytes: _Optional[int] = ..., output_truncated: bool = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., queue_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., failure_code: _Optional[str] = ..., signal: _Optional[int] = ...) -> None: ...

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
