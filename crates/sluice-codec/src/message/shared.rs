//! Re-encoded frames written without copying their record batches.
//!
//! `kafka-protocol` encodes a body into one buffer, so it would copy every
//! record batch a merged Fetch answer or a part of a split Produce request
//! carries. Here the message's *structure* is encoded twice instead, once
//! with every partition's `records` null and once with every one empty. The
//! two encodings have the same length and differ only where each
//! partition's records length is written (compact versions: `0x00` against
//! `0x01`; older ones: `-1` against `0`), in partition order. The frame is
//! the empty-records encoding with the real length and the record batch
//! itself, shared, put in at each place.
//!
//! Anything unexpected (a count of differences other than the partitions,
//! a length mismatch) returns `None`, and the caller encodes as usual.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchResponse, ProduceRequest};
use kafka_protocol::protocol::Encodable;

use crate::out::SHARE_MIN_BYTES;

/// The first Fetch version with compact (flexible) encoding.
const FIRST_FLEXIBLE_FETCH: i16 = 12;

/// The first Produce version with compact (flexible) encoding.
const FIRST_FLEXIBLE_PRODUCE: i16 = 9;

/// The body of `response` at `version` as pieces to write in order; large
/// record batches are shared, not copied. `None` when sharing saves
/// nothing or the body cannot be laid out this way.
pub(super) fn fetch_body(response: &FetchResponse, version: i16) -> Option<Vec<Bytes>> {
    let records: Vec<Option<&Bytes>> = partitions(response).map(|p| p.records.as_ref()).collect();
    spliced(
        response,
        version,
        version >= FIRST_FLEXIBLE_FETCH,
        &records,
        |skeleton, to| partitions_mut(skeleton).for_each(|p| p.records.clone_from(&to)),
    )
}

/// The body of a Produce request (a part of a split one, above all) at
/// `version` as pieces to write in order, its record batches shared as in
/// [`fetch_body`].
pub(super) fn produce_body(request: &ProduceRequest, version: i16) -> Option<Vec<Bytes>> {
    let records: Vec<Option<&Bytes>> = request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .map(|p| p.records.as_ref())
        .collect();
    spliced(
        request,
        version,
        version >= FIRST_FLEXIBLE_PRODUCE,
        &records,
        |skeleton, to| {
            skeleton
                .topic_data
                .iter_mut()
                .flat_map(|t| t.partition_data.iter_mut())
                .for_each(|p| p.records.clone_from(&to));
        },
    )
}

/// `message` at `version` as pieces, each partition's `records` (in
/// encoding order) put in shared; `set_records` sets every partition's
/// `records` of a copy to one value.
fn spliced<M: Encodable + Clone>(
    message: &M,
    version: i16,
    compact: bool,
    records: &[Option<&Bytes>],
    set_records: impl Fn(&mut M, Option<Bytes>),
) -> Option<Vec<Bytes>> {
    if !records.iter().flatten().any(|r| r.len() >= SHARE_MIN_BYTES) {
        return None;
    }
    let mut skeleton = message.clone();
    set_records(&mut skeleton, None);
    let null = encoded(&skeleton, version)?;
    set_records(&mut skeleton, Some(Bytes::new()));
    let empty = encoded(&skeleton, version)?.freeze();
    if null.len() != empty.len() {
        return None;
    }
    let width = if compact { 1 } else { 4 };
    let mut pieces = Vec::with_capacity(3 * records.len() + 1);
    let mut records = records.iter();
    let (mut from, mut at) = (0, 0);
    while at < empty.len() {
        if null.get(at) == empty.get(at) {
            at += 1;
            continue;
        }
        let batch = records.next()?;
        pieces.push(empty.slice(from..at));
        pieces.push(length(batch.map(Bytes::len), width)?);
        pieces.extend(batch.cloned());
        at += width;
        from = at;
    }
    if records.next().is_some() {
        return None;
    }
    pieces.push(empty.slice(from..));
    Some(pieces)
}

fn encoded<M: Encodable>(message: &M, version: i16) -> Option<BytesMut> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).ok()?;
    Some(buf)
}

/// A records length as `width` says: a compact unsigned varint of `len + 1`
/// (0 for null), or an `i32` (-1 for null).
fn length(len: Option<usize>, width: usize) -> Option<Bytes> {
    let mut buf = BytesMut::with_capacity(5);
    if width == 4 {
        buf.put_i32(len.map_or(Some(-1), |n| i32::try_from(n).ok())?);
        return Some(buf.freeze());
    }
    let mut n = len.map_or(Some(0), |n| u32::try_from(n).ok()?.checked_add(1))?;
    while n >= 0x80 {
        buf.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    buf.put_u8(n as u8);
    Some(buf.freeze())
}

fn partitions(response: &FetchResponse) -> impl Iterator<Item = &PartitionData> {
    response.responses.iter().flat_map(|t| t.partitions.iter())
}

fn partitions_mut(response: &mut FetchResponse) -> impl Iterator<Item = &mut PartitionData> {
    response
        .responses
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut())
}

#[cfg(all(test, feature = "tokio"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use bytes::BytesMut;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, NodeEndpoint,
    };
    use kafka_protocol::messages::{ApiKey, BrokerId, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::{OutFrames, Response};

    /// A response with small, large, null and empty record batches over two
    /// topics, with the fields `version` has around records set.
    fn response(version: i16) -> FetchResponse {
        let partition = |index: i32, records: Option<Bytes>| {
            let epoch = if version >= 12 { index } else { -1 };
            PartitionData::default()
                .with_partition_index(index)
                .with_high_watermark(100 + i64::from(index))
                .with_last_stable_offset(90)
                .with_log_start_offset(3)
                .with_aborted_transactions(Some(vec![
                    AbortedTransaction::default()
                        .with_producer_id(7.into())
                        .with_first_offset(40),
                ]))
                .with_preferred_read_replica(BrokerId(-1))
                .with_diverging_epoch(
                    EpochEndOffset::default()
                        .with_epoch(epoch)
                        .with_end_offset(if epoch < 0 { -1 } else { 5 }),
                )
                .with_records(records)
        };
        let big = |n: usize, byte: u8| Some(Bytes::from(vec![byte; n]));
        let topic = |name: &'static str, id: u128, partitions| {
            let topic = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                topic.with_topic_id(uuid::Uuid::from_u128(id))
            } else {
                topic.with_topic(TopicName(StrBytes::from_static_str(name)))
            }
        };
        let endpoints = if version >= 16 {
            vec![
                NodeEndpoint::default()
                    .with_node_id(BrokerId(0))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(9192),
            ]
        } else {
            Vec::new()
        };
        FetchResponse::default()
            .with_throttle_time_ms(3)
            .with_session_id(if version >= 7 { 9 } else { 0 })
            .with_responses(vec![
                topic("a", 1, vec![partition(0, big(5000, 1)), partition(1, None)]),
                topic(
                    "b",
                    2,
                    vec![
                        partition(0, Some(Bytes::new())),
                        partition(1, big(100, 2)),
                        partition(2, big(200_000, 3)),
                    ],
                ),
            ])
            .with_node_endpoints(endpoints)
    }

    fn written(response: &Response) -> Vec<u8> {
        let mut out = OutFrames::default();
        response.encode_into(&mut out).unwrap();
        let mut bytes = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(out.write_to(&mut bytes)).unwrap();
        bytes
    }

    #[test]
    fn shared_fetch_frames_equal_the_copied_ones_at_every_version() {
        for version in 4..=18 {
            let body = ResponseKind::Fetch(response(version));
            let built = Response::from_body(ApiKey::Fetch, version, 42, body);
            let mut copied = BytesMut::new();
            built.encode(&mut copied).unwrap();
            assert_eq!(written(&built), copied.to_vec(), "Fetch v{version}");
            let pieces = fetch_body(&response(version), version).unwrap();
            assert!(
                pieces.iter().any(|p| p.len() == 200_000),
                "v{version}: the large batch is shared, not copied"
            );
        }
    }

    #[test]
    fn a_raw_frame_keeps_its_body_and_gets_the_new_correlation_id() {
        let body = ResponseKind::Fetch(response(16));
        let mut framed = BytesMut::new();
        Response::from_body(ApiKey::Fetch, 16, 42, body)
            .encode(&mut framed)
            .unwrap();
        let frame = framed.split_off(4);
        let mut raw = Response::parse(frame, ApiKey::Fetch, 16).unwrap();
        raw.set_correlation_id(77);
        let mut copied = BytesMut::new();
        raw.encode(&mut copied).unwrap();
        let out = written(&raw);
        assert_eq!(out, copied.to_vec());
        assert_eq!(out[4..8], 77i32.to_be_bytes());
    }

    #[test]
    fn a_raw_request_is_shared_with_its_new_correlation_id() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{ProduceRequest, RequestKind};
        let body = RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(Bytes::from(vec![5u8; 50_000]))),
                        ]),
                ]),
        );
        let client_id = Some(Bytes::from_static(b"client"));
        let mut framed = BytesMut::new();
        crate::Request::from_body(ApiKey::Produce, 9, 3, client_id, body)
            .encode(&mut framed)
            .unwrap();
        let mut raw = crate::Request::parse(framed.split_off(4)).unwrap();
        raw.set_correlation_id(1234);
        let mut copied = BytesMut::new();
        raw.encode(&mut copied).unwrap();
        let mut out = OutFrames::default();
        raw.encode_into(&mut out).unwrap();
        let mut shared = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(out.write_to(&mut shared)).unwrap();
        assert_eq!(shared, copied.to_vec());
        assert_eq!(shared[8..12], 1234i32.to_be_bytes());
    }

    /// A Produce request naming two topics, with large, small, empty and
    /// null record batches, all slices of one `frame`.
    fn produce(version: i16, frame: &Bytes) -> ProduceRequest {
        use kafka_protocol::messages::TopicName;
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let partition = |index: i32, records: Option<Bytes>| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(records)
        };
        let topic = |name: &'static str, id: u128, partitions| {
            let topic = TopicProduceData::default().with_partition_data(partitions);
            if version >= 13 {
                topic.with_topic_id(uuid::Uuid::from_u128(id))
            } else {
                topic.with_name(TopicName(StrBytes::from_static_str(name)))
            }
        };
        ProduceRequest::default()
            .with_transactional_id((version >= 3).then(|| StrBytes::from_static_str("tx").into()))
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                topic("a", 1, vec![partition(0, Some(frame.slice(0..5000)))]),
                topic(
                    "b",
                    2,
                    vec![
                        partition(3, Some(frame.slice(5000..5100))),
                        partition(1, None),
                        partition(2, Some(Bytes::new())),
                        partition(0, Some(frame.slice(5100..205_100))),
                    ],
                ),
            ])
    }

    #[test]
    fn a_built_produce_shares_its_record_batches_at_every_version() {
        use kafka_protocol::messages::RequestKind;
        let frame = Bytes::from((0..205_100u32).map(|i| i as u8).collect::<Vec<u8>>());
        let inside = frame.as_ptr_range();
        for version in 3..=13 {
            let body = RequestKind::Produce(produce(version, &frame));
            let client_id = Some(Bytes::from_static(b"client"));
            let built = crate::Request::from_body(ApiKey::Produce, version, 42, client_id, body);
            let mut copied = BytesMut::new();
            built.encode(&mut copied).unwrap();
            let mut out = OutFrames::default();
            built.encode_into(&mut out).unwrap();
            let shared: Vec<usize> = out
                .chunks()
                .filter(|c| inside.contains(&c.as_ptr()))
                .map(Bytes::len)
                .collect();
            assert_eq!(
                shared,
                vec![5000, 200_000],
                "v{version}: the large batches are the frame's own bytes"
            );
            let mut written = Vec::new();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(out.write_to(&mut written)).unwrap();
            assert_eq!(written, copied.to_vec(), "Produce v{version}");
        }
    }

    #[test]
    fn small_answers_are_encoded_as_usual() {
        let small = FetchResponse::default();
        assert!(fetch_body(&small, 16).is_none());
    }
}
