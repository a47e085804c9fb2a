from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FILE_FORMAT_RAW: FileFormat
FILE_FORMAT_TAR: FileFormat
FILE_FORMAT_UNSPECIFIED: FileFormat

class DownloadFilesRequest(_message.Message):
    __slots__ = ["format", "name", "path"]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    format: FileFormat
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., format: _Optional[_Union[FileFormat, str]] = ...) -> None: ...

class DownloadFilesResponse(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: DownloadHeader
    def __init__(self, header: _Optional[_Union[DownloadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class DownloadHeader(_message.Message):
    __slots__ = ["bytes", "entries"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    entries: int
    def __init__(self, entries: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class UploadFilesRequest(_message.Message):
    __slots__ = ["data", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    header: UploadHeader
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadFilesResponse(_message.Message):
    __slots__ = ["bytes", "directories", "files", "hardlinks", "modes_masked", "symlinks"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    HARDLINKS_FIELD_NUMBER: _ClassVar[int]
    MODES_MASKED_FIELD_NUMBER: _ClassVar[int]
    SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    directories: int
    files: int
    hardlinks: int
    modes_masked: int
    symlinks: int
    def __init__(self, files: _Optional[int] = ..., directories: _Optional[int] = ..., symlinks: _Optional[int] = ..., hardlinks: _Optional[int] = ..., bytes: _Optional[int] = ..., modes_masked: _Optional[int] = ...) -> None: ...

class UploadHeader(_message.Message):
    __slots__ = ["format", "mode", "name", "no_overwrite", "path", "request_id", "size"]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NO_OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    format: FileFormat
    mode: int
    name: str
    no_overwrite: bool
    path: str
    request_id: str
    size: int
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ..., path: _Optional[str] = ..., format: _Optional[_Union[FileFormat, str]] = ..., mode: _Optional[int] = ..., no_overwrite: bool = ..., size: _Optional[int] = ...) -> None: ...

class FileFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
