from service.etcd.api.etcdserverpb import rpc_pb2 as _rpc_pb2
from service.etcd.api.mvccpb import kv_pb2 as _kv_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CampaignRequest(_message.Message):
    __slots__ = ("name", "lease", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    lease: int
    value: bytes
    def __init__(self, name: _Optional[bytes] = ..., lease: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("header", "leader")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    header: _rpc_pb2.ResponseHeader
    leader: LeaderKey
    def __init__(self, header: _Optional[_Union[_rpc_pb2.ResponseHeader, _Mapping]] = ..., leader: _Optional[_Union[LeaderKey, _Mapping]] = ...) -> None: ...

class LeaderKey(_message.Message):
    __slots__ = ("name", "key", "rev", "lease")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REV_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    key: bytes
    rev: int
    lease: int
    def __init__(self, name: _Optional[bytes] = ..., key: _Optional[bytes] = ..., rev: _Optional[int] = ..., lease: _Optional[int] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    def __init__(self, name: _Optional[bytes] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("header", "kv")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    KV_FIELD_NUMBER: _ClassVar[int]
    header: _rpc_pb2.ResponseHeader
    kv: _kv_pb2.KeyValue
    def __init__(self, header: _Optional[_Union[_rpc_pb2.ResponseHeader, _Mapping]] = ..., kv: _Optional[_Union[_kv_pb2.KeyValue, _Mapping]] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: LeaderKey
    def __init__(self, leader: _Optional[_Union[LeaderKey, _Mapping]] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _rpc_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_rpc_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ("leader", "value")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    leader: LeaderKey
    value: bytes
    def __init__(self, leader: _Optional[_Union[LeaderKey, _Mapping]] = ..., value: _Optional[bytes] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: _rpc_pb2.ResponseHeader
    def __init__(self, header: _Optional[_Union[_rpc_pb2.ResponseHeader, _Mapping]] = ...) -> None: ...
