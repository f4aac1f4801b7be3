//! When a part owed by a broker is due for a stall check, on paused time.

use std::time::Duration;

use sluice_codec::kafka_protocol::messages::JoinGroupRequest;
use tokio::time::Instant;

use super::*;
use crate::sink::stalled::{STALL_AFTER, stalls_at};

#[tokio::test(start_paused = true)]
async fn a_produce_is_checked_soon_whatever_its_timeout_and_a_join_after_its_rebalance_wait() {
    let now = Instant::now();
    // produce() asks the broker to wait up to 1 s for the replicas: a hung
    // leader is checked on after STALL_AFTER all the same.
    assert_eq!(stalls_at(&produce(1, -1)), now + STALL_AFTER);
    let join = JoinGroupRequest::default()
        .with_group_id(StrBytes::from_static_str("g").into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(60_000);
    let join = client_request(ApiKey::JoinGroup, 9, 2, RequestKind::JoinGroup(join));
    assert_eq!(
        stalls_at(&join),
        now + Duration::from_secs(60) + STALL_AFTER,
        "a JoinGroup may wait its rebalance timeout at the coordinator"
    );
    assert_eq!(stalls_at(&metadata(3)), now + STALL_AFTER);
}
