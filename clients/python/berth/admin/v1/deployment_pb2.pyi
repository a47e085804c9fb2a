from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CommitDeploymentRequest(_message.Message):
    __slots__ = ["candidate", "expected_generation"]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    candidate: DeploymentCandidate
    expected_generation: int
    def __init__(self, candidate: _Optional[_Union[DeploymentCandidate, _Mapping]] = ..., expected_generation: _Optional[int] = ...) -> None: ...

class CommitDeploymentResponse(_message.Message):
    __slots__ = ["deployment"]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ...) -> None: ...

class Deployment(_message.Message):
    __slots__ = ["commit_time", "configuration", "direct_generations", "generation", "has_credential", "name", "nodes", "observations", "provider_disable_time", "provider_disabled", "provider_kind", "retained_generations", "serving_generation", "serving_time", "specification"]
    COMMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    DIRECT_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    HAS_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_DISABLED_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_DISABLE_TIME_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_KIND_FIELD_NUMBER: _ClassVar[int]
    RETAINED_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    SERVING_GENERATION_FIELD_NUMBER: _ClassVar[int]
    SERVING_TIME_FIELD_NUMBER: _ClassVar[int]
    SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    commit_time: _timestamp_pb2.Timestamp
    configuration: _struct_pb2.Struct
    direct_generations: _containers.RepeatedCompositeFieldContainer[ServedGeneration]
    generation: int
    has_credential: bool
    name: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeGenerations]
    observations: _struct_pb2.Struct
    provider_disable_time: _timestamp_pb2.Timestamp
    provider_disabled: bool
    provider_kind: str
    retained_generations: _containers.RepeatedCompositeFieldContainer[RetainedGeneration]
    serving_generation: int
    serving_time: _timestamp_pb2.Timestamp
    specification: Specification
    def __init__(self, name: _Optional[str] = ..., generation: _Optional[int] = ..., provider_kind: _Optional[str] = ..., configuration: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., observations: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., has_credential: bool = ..., specification: _Optional[_Union[Specification, _Mapping]] = ..., commit_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., provider_disabled: bool = ..., provider_disable_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., serving_generation: _Optional[int] = ..., serving_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., retained_generations: _Optional[_Iterable[_Union[RetainedGeneration, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeGenerations, _Mapping]]] = ..., direct_generations: _Optional[_Iterable[_Union[ServedGeneration, _Mapping]]] = ...) -> None: ...

class DeploymentCandidate(_message.Message):
    __slots__ = ["configuration", "credential", "provider_kind", "specification"]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_KIND_FIELD_NUMBER: _ClassVar[int]
    SPECIFICATION_FIELD_NUMBER: _ClassVar[int]
    configuration: _struct_pb2.Struct
    credential: _struct_pb2.Struct
    provider_kind: str
    specification: Specification
    def __init__(self, provider_kind: _Optional[str] = ..., configuration: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., credential: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., specification: _Optional[_Union[Specification, _Mapping]] = ...) -> None: ...

class DisableProviderRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DisableProviderResponse(_message.Message):
    __slots__ = ["deployment"]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ...) -> None: ...

class EnableProviderRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class EnableProviderResponse(_message.Message):
    __slots__ = ["deployment"]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ...) -> None: ...

class GetDeploymentRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetDeploymentResponse(_message.Message):
    __slots__ = ["deployment"]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    deployment: Deployment
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ...) -> None: ...

class GetResetRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetResetResponse(_message.Message):
    __slots__ = ["deployment_reset"]
    DEPLOYMENT_RESET_FIELD_NUMBER: _ClassVar[int]
    deployment_reset: Reset
    def __init__(self, deployment_reset: _Optional[_Union[Reset, _Mapping]] = ...) -> None: ...

class NodeGenerations(_message.Message):
    __slots__ = ["connected", "generations", "node"]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    connected: bool
    generations: _containers.RepeatedCompositeFieldContainer[ServedGeneration]
    node: str
    def __init__(self, node: _Optional[str] = ..., connected: bool = ..., generations: _Optional[_Iterable[_Union[ServedGeneration, _Mapping]]] = ...) -> None: ...

class PreviewDeploymentRequest(_message.Message):
    __slots__ = ["candidate", "update_mask"]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    candidate: DeploymentCandidate
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, candidate: _Optional[_Union[DeploymentCandidate, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class PreviewDeploymentResponse(_message.Message):
    __slots__ = ["changed", "deployment", "expected_generation"]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    deployment: Deployment
    expected_generation: int
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ..., changed: bool = ..., expected_generation: _Optional[int] = ...) -> None: ...

class ReplaceDeploymentRequest(_message.Message):
    __slots__ = ["candidate", "expected_generation", "update_mask"]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    candidate: DeploymentCandidate
    expected_generation: int
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, candidate: _Optional[_Union[DeploymentCandidate, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., expected_generation: _Optional[int] = ...) -> None: ...

class ReplaceDeploymentResponse(_message.Message):
    __slots__ = ["admission_pause", "changed", "deployment", "retired_nodes", "revoked_enrollment_tokens"]
    ADMISSION_PAUSE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    RETIRED_NODES_FIELD_NUMBER: _ClassVar[int]
    REVOKED_ENROLLMENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    admission_pause: _duration_pb2.Duration
    changed: bool
    deployment: Deployment
    retired_nodes: _containers.RepeatedScalarFieldContainer[str]
    revoked_enrollment_tokens: int
    def __init__(self, deployment: _Optional[_Union[Deployment, _Mapping]] = ..., changed: bool = ..., retired_nodes: _Optional[_Iterable[str]] = ..., revoked_enrollment_tokens: _Optional[int] = ..., admission_pause: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Reset(_message.Message):
    __slots__ = ["deadline", "empty_generation", "end_time", "failure_code", "generation", "held", "held_offline", "name", "phase", "progress_time", "request_time", "requested_by", "sessions_archived", "waiting"]
    class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EMPTY_GENERATION_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    HELD_OFFLINE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_ARCHIVING: Reset.Phase
    PHASE_DONE: Reset.Phase
    PHASE_DRAINING: Reset.Phase
    PHASE_FAILED: Reset.Phase
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FINALIZING: Reset.Phase
    PHASE_UNSPECIFIED: Reset.Phase
    PROGRESS_TIME_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    empty_generation: int
    end_time: _timestamp_pb2.Timestamp
    failure_code: str
    generation: int
    held: int
    held_offline: int
    name: str
    phase: Reset.Phase
    progress_time: _timestamp_pb2.Timestamp
    request_time: _timestamp_pb2.Timestamp
    requested_by: str
    sessions_archived: int
    waiting: _containers.RepeatedCompositeFieldContainer[ResetLane]
    def __init__(self, name: _Optional[str] = ..., phase: _Optional[_Union[Reset.Phase, str]] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., generation: _Optional[int] = ..., sessions_archived: _Optional[int] = ..., held: _Optional[int] = ..., held_offline: _Optional[int] = ..., progress_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., waiting: _Optional[_Iterable[_Union[ResetLane, _Mapping]]] = ..., empty_generation: _Optional[int] = ..., failure_code: _Optional[str] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., requested_by: _Optional[str] = ...) -> None: ...

class ResetLane(_message.Message):
    __slots__ = ["held", "node", "present"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PRESENT_FIELD_NUMBER: _ClassVar[int]
    held: int
    node: str
    present: bool
    def __init__(self, node: _Optional[str] = ..., held: _Optional[int] = ..., present: bool = ...) -> None: ...

class RetainedGeneration(_message.Message):
    __slots__ = ["allocations", "generation"]
    ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    allocations: int
    generation: int
    def __init__(self, generation: _Optional[int] = ..., allocations: _Optional[int] = ...) -> None: ...

class ServedGeneration(_message.Message):
    __slots__ = ["diagnostic_code", "generation", "ready"]
    DIAGNOSTIC_CODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    diagnostic_code: str
    generation: int
    ready: bool
    def __init__(self, generation: _Optional[int] = ..., ready: bool = ..., diagnostic_code: _Optional[str] = ...) -> None: ...

class Specification(_message.Message):
    __slots__ = ["cpu_millis", "disk_bytes", "max_active", "max_retained", "memory_bytes", "suspension"]
    CPU_MILLIS_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    MAX_RETAINED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    SUSPENSION_FIELD_NUMBER: _ClassVar[int]
    cpu_millis: int
    disk_bytes: int
    max_active: int
    max_retained: int
    memory_bytes: int
    suspension: SuspensionPolicy
    def __init__(self, cpu_millis: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., disk_bytes: _Optional[int] = ..., max_active: _Optional[int] = ..., max_retained: _Optional[int] = ..., suspension: _Optional[_Union[SuspensionPolicy, _Mapping]] = ...) -> None: ...

class StartResetRequest(_message.Message):
    __slots__ = ["request_id", "timeout"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    timeout: _duration_pb2.Duration
    def __init__(self, request_id: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class StartResetResponse(_message.Message):
    __slots__ = ["deployment_reset"]
    DEPLOYMENT_RESET_FIELD_NUMBER: _ClassVar[int]
    deployment_reset: Reset
    def __init__(self, deployment_reset: _Optional[_Union[Reset, _Mapping]] = ...) -> None: ...

class SuspensionPolicy(_message.Message):
    __slots__ = ["disabled", "idle", "retention"]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    idle: _duration_pb2.Duration
    retention: _duration_pb2.Duration
    def __init__(self, idle: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., retention: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., disabled: bool = ...) -> None: ...
