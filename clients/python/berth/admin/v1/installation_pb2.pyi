from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetInstallationRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetInstallationResponse(_message.Message):
    __slots__ = ["installation"]
    INSTALLATION_FIELD_NUMBER: _ClassVar[int]
    installation: Installation
    def __init__(self, installation: _Optional[_Union[Installation, _Mapping]] = ...) -> None: ...

class Installation(_message.Message):
    __slots__ = ["ca_fingerprint", "core_version", "create_time", "deployment_generation", "id", "name", "owner_epoch", "public_url"]
    CA_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CORE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_GENERATION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_URL_FIELD_NUMBER: _ClassVar[int]
    ca_fingerprint: str
    core_version: str
    create_time: _timestamp_pb2.Timestamp
    deployment_generation: int
    id: str
    name: str
    owner_epoch: int
    public_url: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., public_url: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., owner_epoch: _Optional[int] = ..., ca_fingerprint: _Optional[str] = ..., deployment_generation: _Optional[int] = ..., core_version: _Optional[str] = ...) -> None: ...
