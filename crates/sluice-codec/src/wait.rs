//! How long a broker may legitimately hold a request before answering.
//!
//! A few requests are *meant* to wait at the broker: a Fetch (and a
//! ShareFetch) waits up to `max_wait_ms` for data, a JoinGroup up to the rebalance timeout for the
//! other members, a Produce with `acks=all` up to `timeout_ms` for the
//! replicas, the admin requests that carry a `timeout_ms` (CreateTopics,
//! DeleteTopics, CreatePartitions, ElectLeaders, DeleteRecords,
//! AlterPartitionReassignments, ListPartitionReassignments, UpdateFeatures)
//! up to it for the controller, and a ListOffsets from v10 up to its
//! `timeout_ms` for an offset in remote storage (KIP-1075). These are every
//! client request that carries a `timeout_ms` (in `kafka-protocol`'s
//! messages, `grep -l 'pub timeout_ms' src/messages/*request.rs`, but for
//! AddRaftVoter, which Sluice does not offer). A SyncGroup waits for the group's leader, up to the
//! rebalance timeout its JoinGroup carried; its own body does not say, so
//! the sink that saw the JoinGroup tells it
//! ([`Request::set_broker_wait_at_least`]). A proxy that fails such a
//! request after its own fixed read timeout would break healthy clients, so
//! a broker connection's read deadline for a request is
//! `read_timeout + broker_wait()`.
//!
//! Timeline of a follower's SyncGroup (read timeout R, rebalance timeout T):
//!
//! ```text
//! JoinGroup sent ──(≤ T)──▶ joined ── SyncGroup sent ──(≤ T: the leader assigns)──▶ answer
//!                                                      └─ failed only after T + R
//! ```
//!
//! Fetch, JoinGroup and Produce are read from the raw body at fixed
//! positions (no decode), or from the decoded body when a transform already
//! decoded it; the admin requests, rare, and a ListOffsets, whose
//! `timeout_ms` follows its topics (the sink decodes it to split it
//! anyway), are decoded when not yet.

use std::time::Duration;

use kafka_protocol::messages::{ApiKey, RequestKind};

use crate::CodecError;
use crate::header::Cursor;
use crate::message::Request;

impl Request {
    /// The time the broker may hold this request by design (zero for most).
    pub fn broker_wait(&self) -> Duration {
        let ms = match self.decoded_body() {
            Some(body) => decoded_wait_ms(body),
            None if decoded_for_wait(self.api_key(), self.api_version()) => {
                let mut decoded = self.clone();
                decoded.body().map_or(0, decoded_wait_ms)
            }
            None => raw_wait_ms(self).unwrap_or(0),
        };
        Duration::from_millis(u64::try_from(ms).unwrap_or(0)).max(self.wait_hint)
    }

    /// Lets the broker hold this request for at least `wait`, beyond what
    /// its own fields say: a SyncGroup, for the rebalance timeout of the
    /// JoinGroup before it.
    pub fn set_broker_wait_at_least(&mut self, wait: Duration) {
        self.wait_hint = self.wait_hint.max(wait);
    }
}

/// The requests whose `timeout_ms` is read from the decoded body: the admin
/// requests that carry one for the controller, and ListOffsets from v10.
fn decoded_for_wait(api: ApiKey, version: i16) -> bool {
    match api {
        ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::CreatePartitions
        | ApiKey::ElectLeaders
        | ApiKey::DeleteRecords
        | ApiKey::AlterPartitionReassignments
        | ApiKey::ListPartitionReassignments
        | ApiKey::UpdateFeatures => true,
        ApiKey::ListOffsets => version >= 10,
        _ => false,
    }
}

fn decoded_wait_ms(body: &RequestKind) -> i32 {
    match body {
        RequestKind::Fetch(f) => f.max_wait_ms,
        RequestKind::ShareFetch(f) => f.max_wait_ms,
        RequestKind::JoinGroup(j) => j.rebalance_timeout_ms.max(j.session_timeout_ms),
        RequestKind::Produce(p) => p.timeout_ms,
        RequestKind::CreateTopics(r) => r.timeout_ms,
        RequestKind::DeleteTopics(r) => r.timeout_ms,
        RequestKind::CreatePartitions(r) => r.timeout_ms,
        RequestKind::ElectLeaders(r) => r.timeout_ms,
        RequestKind::DeleteRecords(r) => r.timeout_ms,
        RequestKind::AlterPartitionReassignments(r) => r.timeout_ms,
        RequestKind::ListPartitionReassignments(r) => r.timeout_ms,
        RequestKind::UpdateFeatures(r) => r.timeout_ms,
        RequestKind::ListOffsets(r) => r.timeout_ms,
        _ => 0,
    }
}

fn raw_wait_ms(request: &Request) -> Result<i32, CodecError> {
    let version = request.api_version();
    let mut cur = Cursor::new(request.raw_body().unwrap_or_default(), "request body");
    match request.api_key() {
        ApiKey::Fetch => {
            if version <= 14 {
                cur.i32()?; // replica_id
            }
            cur.i32()
        }
        ApiKey::JoinGroup => {
            skip_string(&mut cur, version >= 6)?; // group_id
            let session = cur.i32()?;
            let rebalance = if version >= 1 { cur.i32()? } else { session };
            Ok(rebalance.max(session))
        }
        ApiKey::Produce => {
            skip_nullable_string(&mut cur, version >= 9)?; // transactional_id
            cur.i16()?; // acks
            cur.i32()
        }
        _ => Ok(0),
    }
}

fn skip_string(cur: &mut Cursor<'_>, compact: bool) -> Result<(), CodecError> {
    skip_nullable_string(cur, compact)
}

fn skip_nullable_string(cur: &mut Cursor<'_>, compact: bool) -> Result<(), CodecError> {
    let len = if compact {
        i64::from(cur.unsigned_varint()?) - 1
    } else {
        i64::from(cur.i16()?)
    };
    if len > 0 {
        cur.take(usize::try_from(len).unwrap_or(usize::MAX))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::{FetchRequest, JoinGroupRequest, ProduceRequest};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn round_trip(api: ApiKey, version: i16, body: RequestKind) -> Request {
        let mut buf = BytesMut::new();
        Request::from_body(api, version, 7, Some("c".into()), body)
            .encode(&mut buf)
            .unwrap();
        let frame = buf.split_off(4);
        Request::parse(frame).unwrap()
    }

    #[test]
    fn reads_the_wait_of_fetch_join_group_and_produce_from_raw_bytes() {
        for version in [4, 12, 14, 15, 17] {
            let fetch = FetchRequest::default().with_max_wait_ms(1234);
            let raw = round_trip(ApiKey::Fetch, version, RequestKind::Fetch(fetch));
            assert_eq!(
                raw.broker_wait(),
                Duration::from_millis(1234),
                "fetch v{version}"
            );
        }
        for version in [0, 1, 5, 6, 9] {
            let join = JoinGroupRequest::default()
                .with_group_id(StrBytes::from_static_str("group-x").into())
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(if version >= 1 { 300_000 } else { -1 })
                .with_protocol_type(StrBytes::from_static_str("consumer"));
            let raw = round_trip(ApiKey::JoinGroup, version, RequestKind::JoinGroup(join));
            let want = if version >= 1 { 300_000 } else { 10_000 };
            assert_eq!(
                raw.broker_wait(),
                Duration::from_millis(want),
                "join v{version}"
            );
        }
        for version in [3, 8, 9, 12] {
            let produce = ProduceRequest::default()
                .with_transactional_id(Some(StrBytes::from_static_str("txn").into()))
                .with_acks(-1)
                .with_timeout_ms(30_000);
            let raw = round_trip(ApiKey::Produce, version, RequestKind::Produce(produce));
            assert_eq!(
                raw.broker_wait(),
                Duration::from_millis(30_000),
                "produce v{version}"
            );
        }
    }

    #[test]
    fn admin_writes_wait_their_timeout_raw_or_decoded() {
        use kafka_protocol::messages::{
            CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest,
            DeleteTopicsRequest, ElectLeadersRequest,
        };
        let cases: [(ApiKey, i16, RequestKind); 5] = [
            (
                ApiKey::CreateTopics,
                7,
                CreateTopicsRequest::default()
                    .with_timeout_ms(61_000)
                    .into(),
            ),
            (
                ApiKey::DeleteTopics,
                6,
                DeleteTopicsRequest::default()
                    .with_timeout_ms(61_000)
                    .into(),
            ),
            (
                ApiKey::CreatePartitions,
                3,
                CreatePartitionsRequest::default()
                    .with_timeout_ms(61_000)
                    .into(),
            ),
            (
                ApiKey::ElectLeaders,
                2,
                ElectLeadersRequest::default()
                    .with_timeout_ms(61_000)
                    .into(),
            ),
            (
                ApiKey::DeleteRecords,
                2,
                DeleteRecordsRequest::default()
                    .with_timeout_ms(61_000)
                    .into(),
            ),
        ];
        for (api, version, body) in cases {
            let mut raw = round_trip(api, version, body);
            assert_eq!(raw.broker_wait(), Duration::from_secs(61), "raw {api:?}");
            raw.body().unwrap();
            assert_eq!(raw.broker_wait(), Duration::from_secs(61), "{api:?}");
        }
    }

    #[test]
    fn reassignments_features_and_list_offsets_v10_wait_their_timeout() {
        use kafka_protocol::messages::{
            AlterPartitionReassignmentsRequest, ListOffsetsRequest,
            ListPartitionReassignmentsRequest, UpdateFeaturesRequest,
        };
        let cases: [(ApiKey, i16, RequestKind, u64); 5] = [
            (
                ApiKey::AlterPartitionReassignments,
                0,
                AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(62_000)
                    .into(),
                62,
            ),
            (
                ApiKey::ListPartitionReassignments,
                0,
                ListPartitionReassignmentsRequest::default()
                    .with_timeout_ms(62_000)
                    .into(),
                62,
            ),
            (
                ApiKey::UpdateFeatures,
                1,
                UpdateFeaturesRequest::default()
                    .with_timeout_ms(62_000)
                    .into(),
                62,
            ),
            (
                ApiKey::ListOffsets,
                10,
                ListOffsetsRequest::default().with_timeout_ms(62_000).into(),
                62,
            ),
            // Before v10 a ListOffsets carries no timeout: not decoded.
            (
                ApiKey::ListOffsets,
                9,
                ListOffsetsRequest::default().into(),
                0,
            ),
        ];
        for (api, version, body, secs) in cases {
            let mut raw = round_trip(api, version, body);
            let want = Duration::from_secs(secs);
            assert_eq!(raw.broker_wait(), want, "raw {api:?} v{version}");
            raw.body().unwrap();
            assert_eq!(raw.broker_wait(), want, "{api:?} v{version}");
        }
    }

    #[test]
    fn a_sync_group_waits_what_the_sink_says() {
        use kafka_protocol::messages::SyncGroupRequest;
        let body = SyncGroupRequest::default()
            .with_group_id(StrBytes::from_static_str("g").into())
            .into();
        let mut sync = round_trip(ApiKey::SyncGroup, 5, body);
        assert_eq!(sync.broker_wait(), Duration::ZERO, "its body says nothing");
        sync.set_broker_wait_at_least(Duration::from_secs(300));
        sync.set_broker_wait_at_least(Duration::from_secs(10));
        assert_eq!(sync.broker_wait(), Duration::from_secs(300));
    }

    #[test]
    fn other_requests_and_garbage_wait_nothing() {
        let raw = round_trip(
            ApiKey::Metadata,
            12,
            RequestKind::Metadata(Default::default()),
        );
        assert_eq!(raw.broker_wait(), Duration::ZERO);
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0, 1, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0]);
        let truncated = Request::parse(frame).unwrap();
        assert_eq!(truncated.broker_wait(), Duration::ZERO);
    }
}
