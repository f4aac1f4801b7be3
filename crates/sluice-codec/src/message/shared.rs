//! A merged Fetch response written without copying its record batches.
//!
//! `kafka-protocol` encodes a body into one buffer, so it would copy every
//! record batch a merged fetch carries. Here the response's *structure* is
//! encoded twice instead, once with every partition's `records` null and
//! once with every one empty. The two encodings have the same length and
//! differ only where each partition's records length is written (compact
//! versions: `0x00` against `0x01`; older ones: `-1` against `0`), in
//! partition order. The frame is the empty-records encoding with the real
//! length and the record batch itself, shared, put in at each place.
//!
//! Anything unexpected (a count of differences other than the partitions,
//! a length mismatch) returns `None`, and the caller encodes as usual.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::protocol::Encodable;

use crate::out::SHARE_MIN_BYTES;

/// The first Fetch version with compact (flexible) encoding.
const FIRST_FLEXIBLE_VERSION: i16 = 12;

/// The body of `response` at `version` as pieces to write in order; large
/// record batches are shared, not copied. `None` when sharing saves
/// nothing or the body cannot be laid out this way.
pub(super) fn fetch_body(response: &FetchResponse, version: i16) -> Option<Vec<Bytes>> {
    let records: Vec<Option<&Bytes>> = partitions(response).map(|p| p.records.as_ref()).collect();
    if !records.iter().flatten().any(|r| r.len() >= SHARE_MIN_BYTES) {
        return None;
    }
    let mut skeleton = response.clone();
    partitions_mut(&mut skeleton).for_each(|p| p.records = None);
    let null = encoded(&skeleton, version)?;
    partitions_mut(&mut skeleton).for_each(|p| p.records = Some(Bytes::new()));
    let empty = encoded(&skeleton, version)?.freeze();
    if null.len() != empty.len() {
        return None;
    }
    let width = if version >= FIRST_FLEXIBLE_VERSION {
        1
    } else {
        4
    };
    let mut pieces = Vec::with_capacity(3 * records.len() + 1);
    let mut records = records.into_iter();
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

fn encoded(response: &FetchResponse, version: i16) -> Option<BytesMut> {
    let mut buf = BytesMut::new();
    response.encode(&mut buf, version).ok()?;
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

    #[test]
    fn small_answers_are_encoded_as_usual() {
        let small = FetchResponse::default();
        assert!(fetch_body(&small, 16).is_none());
    }
}
