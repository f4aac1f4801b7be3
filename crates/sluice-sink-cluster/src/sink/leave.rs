//! Leaving at shutdown: how a stopping Sluice node moves its clients to the
//! other nodes before it drains.
//!
//! The binary stops accepting on its listeners at the first SIGTERM (so the
//! peers' health check, a TCP connect to `address_for_peers`, fails and
//! they stop showing this node within one `check_shotover_peers_delay_ms`),
//! then calls [`Leave::leave`] on every cluster sink, then waits up to
//! `--leave-timeout-secs` before it drains. From [`Leave::leave`] on, while
//! another node is up:
//!
//! - this node is shown down in its own Metadata, FindCoordinator and
//!   DescribeCluster answers, so the partitions and coordinators it stood
//!   for are shown on the remaining nodes (the same choice its peers make
//!   for a node that is down, `rewrite/choose.rs`);
//! - once the peers have had time to see it gone (one and a half
//!   `check_shotover_peers_delay_ms` after [`Leave::leave`]: each has
//!   probed it since; at once without health checks), a request that
//!   needs a leader or a coordinator (Produce, Fetch,
//!   ListOffsets, OffsetForLeaderEpoch, ..., OffsetFetch, JoinGroup,
//!   SyncGroup, Heartbeat, OffsetCommit, LeaveGroup, transactional
//!   requests) is answered at once with NOT_LEADER_OR_FOLLOWER or
//!   NOT_COORDINATOR: the client no longer sees this node as its leader or
//!   coordinator. Both errors are retriable: Kafka clients (Java's
//!   producer, consumer and admin client, librdkafka) retry them after a
//!   metadata refresh or a FindCoordinator, which this node or a peer
//!   answers without this node, and the application sees no error. Nothing
//!   reached a broker, so an idempotent producer's sequence is unharmed.
//!   A fetch in a fetch session is answered from the partitions the
//!   session stands for, and the answer ends the session. Before that
//!   such requests are served: a client sent to the peers sooner could be
//!   sent straight back by a peer that still shows this node, and find its
//!   listener closed (librdkafka reports such a refused connect through
//!   its error callback);
//! - metadata, admin and fan-out requests are served as before, and
//!   Produce with `acks=0` (which has no answer to carry an error) is
//!   forwarded.

use std::time::Duration;

use sluice_chain::ChainError;
use sluice_codec::{Request, RequestKind, ResponseKind};
use sluice_metrics::names;
use tracing::{debug, info};

use super::Shared;
use crate::pending::PendingResponse;
use sluice_cluster::error_codes::ErrorCode;
use sluice_cluster::route;
use sluice_cluster::topology::SluiceNodes;

/// Makes a cluster sink's node leave what clients are shown (see the module
/// documentation). Cheap to clone; every clone acts on the same sink.
#[derive(Debug, Clone)]
pub struct Leave {
    nodes: SluiceNodes,
}

impl Leave {
    pub(super) fn new(nodes: SluiceNodes) -> Self {
        Self { nodes }
    }

    /// Starts leaving. Returns whether another Sluice node is up to take
    /// this one's clients (when none is, the node keeps showing itself and
    /// there is nothing to wait for).
    pub fn leave(&self) -> bool {
        let hidden = self.nodes.set_leaving(super::now());
        if hidden {
            info!(
                broker_id = self.nodes.local_id().0,
                "leaving: this sluice node is no longer shown to clients; once its \
                 peers have seen it gone, requests for its leaders and coordinators \
                 get retriable errors"
            );
        } else {
            info!(
                broker_id = self.nodes.local_id().0,
                "leaving: no other sluice node is up, this one stays shown"
            );
        }
        hidden
    }

    /// Whether the node is leaving and no longer shown.
    pub fn is_hidden(&self) -> bool {
        self.nodes.is_hidden()
    }
}

/// How long after it starts leaving a node with health checks every
/// `peers_every` answers with errors: one and a half periods, by which
/// every peer has probed it once since (and found its listener closed).
pub(super) fn errors_after(peers_every: Option<Duration>) -> Duration {
    peers_every.map_or(Duration::ZERO, |every| every + every / 2)
}

/// While the node leaves, the answer to a request that needs a leader or
/// a coordinator (see [`route::leaving_answer`]; a Fetch is seen to by
/// the consume path, `sink/fetch.rs`). `None` when the node answers no leave errors (yet).
pub(super) fn leaving_answer(
    shared: &Shared,
    request: &mut Request,
) -> Result<Option<PendingResponse>, ChainError> {
    if !request.expects_response()
        || !shared
            .nodes
            .answers_leaving(super::now(), shared.leave_errors_after)
    {
        return Ok(None);
    }
    let answer = route::leaving_answer(request)?;
    Ok(answer.map(|(answer, code)| leaving_error(request, answer, code)))
}

/// While the node leaves, the answer to a Fetch (`body`: the whole fetch
/// its session stands for, else the request's own).
pub(super) fn leaving_fetch_answer(
    shared: &Shared,
    request: &Request,
    body: &RequestKind,
) -> Option<PendingResponse> {
    if !shared
        .nodes
        .answers_leaving(super::now(), shared.leave_errors_after)
    {
        return None;
    }
    let (answer, code) = route::leaving_fetch_answer(body, request.api_version())?;
    Some(leaving_error(request, answer, code))
}

/// `request` answered with `answer`, which carries `code` wherever it has a
/// place for one; counted as synthesized.
fn leaving_error(request: &Request, answer: ResponseKind, code: ErrorCode) -> PendingResponse {
    let (api, version) = (request.api_key(), request.api_version());
    debug!("leaving: answering {api:?} v{version} with error {code}");
    metrics::counter!(names::SYNTHESIZED_ERROR_RESPONSES, "api" => format!("{api:?}")).increment(1);
    PendingResponse::answering(request, answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::topology::fixtures;

    #[test]
    fn errors_start_once_every_peer_has_probed() {
        assert_eq!(errors_after(None), Duration::ZERO);
        assert_eq!(
            errors_after(Some(Duration::from_millis(500))),
            Duration::from_millis(750)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leaving_node_hides_at_once() {
        let nodes = fixtures::sluice_nodes();
        let leave = Leave::new(nodes.clone());
        assert!(!leave.is_hidden());
        assert!(leave.leave(), "other nodes are up");
        assert!(leave.is_hidden());
        let local = nodes.local_id();
        assert!(
            nodes
                .snapshot()
                .iter()
                .all(|n| n.broker_id != local || !n.up),
            "the local node is shown down"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            nodes.leaving_for(crate::sink::now()),
            Some(Duration::from_secs(1))
        );
    }
}
