//! What the sink does with a follower's answer to a consumer fetch.
//!
//! Rack-aware routing (`topology/view/replica.rs`) may send a consumer's
//! fetch of a partition to an in-rack follower. When the follower answers a
//! partition with an error, the partition's fetches go back to its leader
//! for a while (a fence in the view), and a follower's OFFSET_OUT_OF_RANGE,
//! which the client would act on by resetting its position, reaches the
//! client as the retriable NOT_LEADER_OR_FOLLOWER, so that the leader gets
//! the last word (see `route/produce_fetch.rs`).

use sluice_broker::BrokerAddress;
use sluice_codec::{CodecError, Response, ResponseKind};
use tokio::time::Instant;
use tracing::debug;

use super::KafkaSinkCluster;
use sluice_cluster::error_codes::OFFSET_OUT_OF_RANGE;
use sluice_cluster::route::produce_fetch;
use sluice_cluster::topology::BrokerId;

impl KafkaSinkCluster {
    /// Fences the partitions a follower answered with an error and softens
    /// its OFFSET_OUT_OF_RANGE. `broker`: who answered (without a known id,
    /// nothing is done).
    pub(super) fn post_follower_fetch(
        &self,
        response: &mut Response,
        broker: Option<&BrokerAddress>,
    ) -> Result<(), CodecError> {
        let Some(answered_by) = broker.and_then(|b| b.id).map(BrokerId) else {
            return Ok(());
        };
        let version = response.api_version();
        let errors = {
            let ResponseKind::Fetch(fetch) = response.body()? else {
                return Ok(());
            };
            let view = self.shared.view.read();
            produce_fetch::follower_errors(fetch, version, answered_by, |t, p| view.leader(t, p))
        };
        if errors.is_empty() {
            return Ok(());
        }
        {
            let now = Instant::now().into_std();
            let mut view = self.shared.view.write();
            for e in &errors {
                view.fence_follower_fetch(&e.topic, e.partition, now);
            }
        }
        debug!(
            broker = answered_by.0,
            partitions = errors.len(),
            "a follower answered fetched partitions with errors; their fetches go to the leader for now"
        );
        if errors.iter().any(|e| e.error_code == OFFSET_OUT_OF_RANGE)
            && let ResponseKind::Fetch(fetch) = response.body_mut()?
        {
            produce_fetch::soften_follower_errors(fetch, version, &errors);
        }
        Ok(())
    }
}
