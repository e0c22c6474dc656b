from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterStreamRequest(_message.Message):
    __slots__ = ("name", "root", "item", "rate", "event_time", "event_time_rate", "history")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_RATE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    name: str
    root: str
    item: str
    rate: float
    event_time: str
    event_time_rate: float
    history: str
    def __init__(self, name: _Optional[str] = ..., root: _Optional[str] = ..., item: _Optional[str] = ..., rate: _Optional[float] = ..., event_time: _Optional[str] = ..., event_time_rate: _Optional[float] = ..., history: _Optional[str] = ...) -> None: ...

class RegisterStreamReply(_message.Message):
    __slots__ = ("stream", "superpeer", "max_item_bytes", "next_position", "history")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SUPERPEER_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    NEXT_POSITION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    stream: str
    superpeer: str
    max_item_bytes: int
    next_position: int
    history: str
    def __init__(self, stream: _Optional[str] = ..., superpeer: _Optional[str] = ..., max_item_bytes: _Optional[int] = ..., next_position: _Optional[int] = ..., history: _Optional[str] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("stream", "first_sequence", "items", "position")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    stream: str
    first_sequence: int
    items: _containers.RepeatedScalarFieldContainer[bytes]
    position: int
    def __init__(self, stream: _Optional[str] = ..., first_sequence: _Optional[int] = ..., items: _Optional[_Iterable[bytes]] = ..., position: _Optional[int] = ...) -> None: ...

class PublishReply(_message.Message):
    __slots__ = ("accepted", "rejected", "rejections", "next_position", "duplicates", "held_back_s", "held_back")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_POSITION_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    HELD_BACK_S_FIELD_NUMBER: _ClassVar[int]
    HELD_BACK_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    rejected: int
    rejections: _containers.RepeatedScalarFieldContainer[str]
    next_position: int
    duplicates: int
    held_back_s: float
    held_back: str
    def __init__(self, accepted: _Optional[int] = ..., rejected: _Optional[int] = ..., rejections: _Optional[_Iterable[str]] = ..., next_position: _Optional[int] = ..., duplicates: _Optional[int] = ..., held_back_s: _Optional[float] = ..., held_back: _Optional[str] = ...) -> None: ...

class CloseStreamRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class CloseStreamReply(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: int
    def __init__(self, items: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("query", "strategy", "wait_for_streams", "from_start", "since_s", "approximate", "confidence", "min_rate", "weight")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_STREAMS_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    SINCE_S_FIELD_NUMBER: _ClassVar[int]
    APPROXIMATE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    MIN_RATE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    query: str
    strategy: str
    wait_for_streams: bool
    from_start: bool
    since_s: float
    approximate: bool
    confidence: float
    min_rate: int
    weight: float
    def __init__(self, query: _Optional[str] = ..., strategy: _Optional[str] = ..., wait_for_streams: _Optional[bool] = ..., from_start: _Optional[bool] = ..., since_s: _Optional[float] = ..., approximate: _Optional[bool] = ..., confidence: _Optional[float] = ..., min_rate: _Optional[int] = ..., weight: _Optional[float] = ...) -> None: ...

class SubscribeReply(_message.Message):
    __slots__ = ("subscription", "plan_json", "description", "history", "sample", "warnings")
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PLAN_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    subscription: str
    plan_json: str
    description: str
    history: str
    sample: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subscription: _Optional[str] = ..., plan_json: _Optional[str] = ..., description: _Optional[str] = ..., history: _Optional[str] = ..., sample: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class UnsubscribeRequest(_message.Message):
    __slots__ = ("subscription",)
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    subscription: str
    def __init__(self, subscription: _Optional[str] = ...) -> None: ...

class UnsubscribeReply(_message.Message):
    __slots__ = ("removed_streams",)
    REMOVED_STREAMS_FIELD_NUMBER: _ClassVar[int]
    removed_streams: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, removed_streams: _Optional[_Iterable[str]] = ...) -> None: ...

class ReadResultsRequest(_message.Message):
    __slots__ = ("subscription", "offset", "max_items", "wait_ms", "peek")
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    PEEK_FIELD_NUMBER: _ClassVar[int]
    subscription: str
    offset: int
    max_items: int
    wait_ms: int
    peek: bool
    def __init__(self, subscription: _Optional[str] = ..., offset: _Optional[int] = ..., max_items: _Optional[int] = ..., wait_ms: _Optional[int] = ..., peek: _Optional[bool] = ...) -> None: ...

class ReadResultsReply(_message.Message):
    __slots__ = ("offset", "items", "closed", "root", "dropped", "degraded", "approximation", "past")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    APPROXIMATION_FIELD_NUMBER: _ClassVar[int]
    PAST_FIELD_NUMBER: _ClassVar[int]
    offset: int
    items: _containers.RepeatedScalarFieldContainer[str]
    closed: bool
    root: str
    dropped: int
    degraded: str
    approximation: str
    past: str
    def __init__(self, offset: _Optional[int] = ..., items: _Optional[_Iterable[str]] = ..., closed: _Optional[bool] = ..., root: _Optional[str] = ..., dropped: _Optional[int] = ..., degraded: _Optional[str] = ..., approximation: _Optional[str] = ..., past: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class CutLinkRequest(_message.Message):
    __slots__ = ("peer", "cut")
    PEER_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    peer: str
    cut: bool
    def __init__(self, peer: _Optional[str] = ..., cut: _Optional[bool] = ...) -> None: ...

class CutLinkReply(_message.Message):
    __slots__ = ("cut",)
    CUT_FIELD_NUMBER: _ClassVar[int]
    cut: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cut: _Optional[_Iterable[str]] = ...) -> None: ...

class LookupStreamsRequest(_message.Message):
    __slots__ = ("input_json", "with_statistics", "sample_of")
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    WITH_STATISTICS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_OF_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    with_statistics: bool
    sample_of: int
    def __init__(self, input_json: _Optional[str] = ..., with_statistics: _Optional[bool] = ..., sample_of: _Optional[int] = ...) -> None: ...

class LookupStreamsReply(_message.Message):
    __slots__ = ("streams_json", "usage_json", "statistics_json")
    STREAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    USAGE_JSON_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_JSON_FIELD_NUMBER: _ClassVar[int]
    streams_json: str
    usage_json: str
    statistics_json: str
    def __init__(self, streams_json: _Optional[str] = ..., usage_json: _Optional[str] = ..., statistics_json: _Optional[str] = ...) -> None: ...

class GetStatisticsRequest(_message.Message):
    __slots__ = ("stream", "sample_of")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_OF_FIELD_NUMBER: _ClassVar[int]
    stream: str
    sample_of: int
    def __init__(self, stream: _Optional[str] = ..., sample_of: _Optional[int] = ...) -> None: ...

class GetStatisticsReply(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class AnnounceStreamRequest(_message.Message):
    __slots__ = ("stream_json",)
    STREAM_JSON_FIELD_NUMBER: _ClassVar[int]
    stream_json: str
    def __init__(self, stream_json: _Optional[str] = ...) -> None: ...

class AnnounceStreamReply(_message.Message):
    __slots__ = ("waiting_json",)
    WAITING_JSON_FIELD_NUMBER: _ClassVar[int]
    waiting_json: str
    def __init__(self, waiting_json: _Optional[str] = ...) -> None: ...

class ActivateRequest(_message.Message):
    __slots__ = ("subscription",)
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    subscription: str
    def __init__(self, subscription: _Optional[str] = ...) -> None: ...

class FindStreamRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class FindStreamReply(_message.Message):
    __slots__ = ("stream_json",)
    STREAM_JSON_FIELD_NUMBER: _ClassVar[int]
    stream_json: str
    def __init__(self, stream_json: _Optional[str] = ...) -> None: ...

class ActivateReply(_message.Message):
    __slots__ = ("ok", "reason")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ReserveRequest(_message.Message):
    __slots__ = ("transaction", "part_json")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    PART_JSON_FIELD_NUMBER: _ClassVar[int]
    transaction: str
    part_json: str
    def __init__(self, transaction: _Optional[str] = ..., part_json: _Optional[str] = ...) -> None: ...

class ReserveReply(_message.Message):
    __slots__ = ("ok", "reason", "answer_json")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ANSWER_JSON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    answer_json: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., answer_json: _Optional[str] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ("transaction", "commit_json")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_JSON_FIELD_NUMBER: _ClassVar[int]
    transaction: str
    commit_json: str
    def __init__(self, transaction: _Optional[str] = ..., commit_json: _Optional[str] = ...) -> None: ...

class CommitReply(_message.Message):
    __slots__ = ("starts_json", "incarnation")
    STARTS_JSON_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    starts_json: str
    incarnation: str
    def __init__(self, starts_json: _Optional[str] = ..., incarnation: _Optional[str] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("transaction",)
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    transaction: str
    def __init__(self, transaction: _Optional[str] = ...) -> None: ...

class AbortReply(_message.Message):
    __slots__ = ("hold_lapsed",)
    HOLD_LAPSED_FIELD_NUMBER: _ClassVar[int]
    hold_lapsed: bool
    def __init__(self, hold_lapsed: _Optional[bool] = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ("subscription", "streams")
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    subscription: str
    streams: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subscription: _Optional[str] = ..., streams: _Optional[_Iterable[str]] = ...) -> None: ...

class RemoveReply(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, removed: _Optional[_Iterable[str]] = ...) -> None: ...

class TruncateRequest(_message.Message):
    __slots__ = ("stream", "peer")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    stream: str
    peer: str
    def __init__(self, stream: _Optional[str] = ..., peer: _Optional[str] = ...) -> None: ...

class TruncateReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CountAnchorRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class CountAnchorReply(_message.Message):
    __slots__ = ("known", "origin", "ordinal", "reason")
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    known: bool
    origin: int
    ordinal: int
    reason: str
    def __init__(self, known: _Optional[bool] = ..., origin: _Optional[int] = ..., ordinal: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class AlignCountRequest(_message.Message):
    __slots__ = ("stream", "origin", "ordinal")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    stream: str
    origin: int
    ordinal: int
    def __init__(self, stream: _Optional[str] = ..., origin: _Optional[int] = ..., ordinal: _Optional[int] = ...) -> None: ...

class AlignCountReply(_message.Message):
    __slots__ = ("aligned", "later", "reason")
    ALIGNED_FIELD_NUMBER: _ClassVar[int]
    LATER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    aligned: bool
    later: bool
    reason: str
    def __init__(self, aligned: _Optional[bool] = ..., later: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ClaimLoweringRequest(_message.Message):
    __slots__ = ("neighbour", "subscription", "priority")
    NEIGHBOUR_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    neighbour: str
    subscription: str
    priority: float
    def __init__(self, neighbour: _Optional[str] = ..., subscription: _Optional[str] = ..., priority: _Optional[float] = ...) -> None: ...

class ClaimLoweringReply(_message.Message):
    __slots__ = ("granted", "reason")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    reason: str
    def __init__(self, granted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class WidenStreamRequest(_message.Message):
    __slots__ = ("transaction", "step", "wide_json", "was_json")
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    WIDE_JSON_FIELD_NUMBER: _ClassVar[int]
    WAS_JSON_FIELD_NUMBER: _ClassVar[int]
    transaction: str
    step: str
    wide_json: str
    was_json: str
    def __init__(self, transaction: _Optional[str] = ..., step: _Optional[str] = ..., wide_json: _Optional[str] = ..., was_json: _Optional[str] = ...) -> None: ...

class WidenStreamReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TransferRequest(_message.Message):
    __slots__ = ("stream", "first_sequence", "items", "watermark", "end", "sender", "sender_epoch", "watermark_path", "origins", "numbered_by_origin", "payload", "lengths")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    SENDER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_PATH_FIELD_NUMBER: _ClassVar[int]
    ORIGINS_FIELD_NUMBER: _ClassVar[int]
    NUMBERED_BY_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    first_sequence: int
    items: _containers.RepeatedScalarFieldContainer[str]
    watermark: float
    end: bool
    sender: str
    sender_epoch: str
    watermark_path: str
    origins: _containers.RepeatedScalarFieldContainer[int]
    numbered_by_origin: bool
    payload: bytes
    lengths: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, stream: _Optional[str] = ..., first_sequence: _Optional[int] = ..., items: _Optional[_Iterable[str]] = ..., watermark: _Optional[float] = ..., end: _Optional[bool] = ..., sender: _Optional[str] = ..., sender_epoch: _Optional[str] = ..., watermark_path: _Optional[str] = ..., origins: _Optional[_Iterable[int]] = ..., numbered_by_origin: _Optional[bool] = ..., payload: _Optional[bytes] = ..., lengths: _Optional[_Iterable[int]] = ...) -> None: ...

class TransferReply(_message.Message):
    __slots__ = ("acknowledged", "refused_code", "refused", "pressure")
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_CODE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    PRESSURE_FIELD_NUMBER: _ClassVar[int]
    acknowledged: int
    refused_code: str
    refused: str
    pressure: str
    def __init__(self, acknowledged: _Optional[int] = ..., refused_code: _Optional[str] = ..., refused: _Optional[str] = ..., pressure: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("sender", "digest_json", "records_json", "relay_to")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    DIGEST_JSON_FIELD_NUMBER: _ClassVar[int]
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    RELAY_TO_FIELD_NUMBER: _ClassVar[int]
    sender: str
    digest_json: str
    records_json: str
    relay_to: str
    def __init__(self, sender: _Optional[str] = ..., digest_json: _Optional[str] = ..., records_json: _Optional[str] = ..., relay_to: _Optional[str] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("superpeer", "hears", "incarnation", "records_json", "relayed", "digest_hash")
    SUPERPEER_FIELD_NUMBER: _ClassVar[int]
    HEARS_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    RELAYED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_HASH_FIELD_NUMBER: _ClassVar[int]
    superpeer: str
    hears: _containers.RepeatedScalarFieldContainer[str]
    incarnation: str
    records_json: str
    relayed: bool
    digest_hash: str
    def __init__(self, superpeer: _Optional[str] = ..., hears: _Optional[_Iterable[str]] = ..., incarnation: _Optional[str] = ..., records_json: _Optional[str] = ..., relayed: _Optional[bool] = ..., digest_hash: _Optional[str] = ...) -> None: ...
