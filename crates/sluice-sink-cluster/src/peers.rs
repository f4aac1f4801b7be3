//! Peer health checks: which Sluice nodes are up.
//!
//! Every `check_shotover_peers_delay_ms`, each other Sluice node's
//! `address_for_peers` is probed with a TCP connect bounded by the connect
//! timeout, all peers at once so that one slow peer does not delay the
//! others. The result goes to [`SluiceNodes::set_up`], which the rewrites
//! read: a node that is down stops being shown to clients. Transitions are
//! logged (down at warn, up at info by `set_up`). The task stops when the
//! sink's builder is dropped (its cancellation token).

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use sluice_cluster::topology::{Marked, ShotoverNode, SluiceNodes};

/// Starts the health checks; they run until `cancel` fires.
pub(crate) fn spawn(
    nodes: SluiceNodes,
    every: Duration,
    timeout: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => {
                    debug!("peer health checks stopped");
                    return;
                }
                _ = tick.tick() => {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = check_all(&nodes, timeout) => {}
                    }
                }
            }
        }
    })
}

/// Probes every peer once and records the results.
pub(crate) async fn check_all(nodes: &SluiceNodes, timeout: Duration) {
    let peers = nodes.peers();
    let probes = peers.iter().map(|peer| probe(peer, timeout));
    let results = futures::future::join_all(probes).await;
    for (peer, result) in peers.iter().zip(results) {
        let up = result.is_ok();
        let marked = nodes.set_up(peer.broker_id, up);
        match marked {
            Marked::UnknownNode => {
                debug!(
                    broker_id = peer.broker_id.0,
                    "ignoring state of an unknown sluice node"
                );
            }
            Marked::Changed => info!(
                broker_id = peer.broker_id.0,
                address = %peer.address_for_clients,
                "sluice node is now {}",
                if up { "up" } else { "down" }
            ),
            Marked::Unchanged => {}
        }
        let changed = marked.changed();
        if let Err(reason) = result {
            if changed {
                warn!(
                    broker_id = peer.broker_id.0,
                    address = %peer.address_for_peers,
                    "sluice peer is down, clients stop seeing it: {reason}"
                );
            } else {
                debug!(
                    broker_id = peer.broker_id.0,
                    "sluice peer still down: {reason}"
                );
            }
        }
    }
}

/// A TCP connect to the peer's `address_for_peers`, bounded by `timeout`.
async fn probe(peer: &ShotoverNode, timeout: Duration) -> Result<(), String> {
    let addr = &peer.address_for_peers;
    let port = u16::try_from(addr.port).map_err(|_| format!("invalid port {}", addr.port))?;
    match tokio::time::timeout(timeout, TcpStream::connect((addr.host.as_str(), port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no connection within {}ms", timeout.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use sluice_cluster::topology::{Address, BrokerId};
    use sluice_codec::kafka_protocol::protocol::StrBytes;

    fn node(id: i32, port: u16) -> ShotoverNode {
        let addr = Address::new(StrBytes::from_static_str("127.0.0.1"), i32::from(port));
        ShotoverNode {
            broker_id: BrokerId(id),
            rack: StrBytes::from_static_str("r"),
            address_for_clients: addr.clone(),
            address_for_peers: addr,
            up: true,
        }
    }

    /// A port with nothing listening (bound, then released).
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn marks_unreachable_peers_down_and_back_up() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live = listener.local_addr().unwrap().port();
        let dead = closed_port();
        let nodes =
            SluiceNodes::new(vec![node(0, 1), node(1, live), node(2, dead)], BrokerId(0)).unwrap();
        check_all(&nodes, Duration::from_secs(5)).await;
        let up: Vec<i32> = nodes.up_nodes().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(up, [0, 1], "the local node is always up; 2 is unreachable");
        drop(listener);
        check_all(&nodes, Duration::from_secs(5)).await;
        let up: Vec<i32> = nodes.up_nodes().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(up, [0], "1 stopped listening");
    }

    #[tokio::test]
    async fn stops_when_cancelled() {
        let nodes = SluiceNodes::new(vec![node(0, 1)], BrokerId(0)).unwrap();
        let cancel = CancellationToken::new();
        let task = spawn(
            nodes,
            Duration::from_millis(10),
            Duration::from_millis(100),
            cancel.clone(),
        );
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the task stops")
            .unwrap();
    }
}
