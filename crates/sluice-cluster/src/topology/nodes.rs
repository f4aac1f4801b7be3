//! The Sluice nodes of a deployment: what clients are told the cluster is.
//!
//! The set is fixed by the config (`shotover_nodes`); only each node's up/down
//! state changes, written by the peer health checks and read by every client
//! connection when it rewrites a response. The state is one `AtomicBool` per
//! node, so marking a node never blocks a reader. The local node is up
//! (it is the one answering, and a client must always see at least one
//! node) until it leaves at shutdown ([`SluiceNodes::set_leaving`]): then it
//! is shown down, in its own answers as the peers show it once their health
//! check finds its listener closed, as long as another node is up to stand
//! for it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use std::time::Instant;

use sluice_codec::kafka_protocol::messages::BrokerId;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_config::{KafkaSinkClusterConfig, ShotoverNodeConfig};

use super::TopologyError;

/// A `host:port` in the form Kafka messages carry it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    /// Host name or IP address, IPv6 without brackets.
    pub host: StrBytes,
    /// TCP port (an `i32`, as in Kafka messages).
    pub port: i32,
}

impl Address {
    /// An address from its parts.
    pub fn new(host: impl Into<StrBytes>, port: i32) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// Parses `host:port`, `a.b.c.d:port` or `[v6]:port`.
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        let (host, port) = s.rsplit_once(':').ok_or("expected host:port")?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').ok_or("unclosed `[` in IPv6 address")?,
            None if host.contains(':') => return Err("write an IPv6 address as [address]:port"),
            None => host,
        };
        if host.is_empty() {
            return Err("empty host");
        }
        let port: u16 = port
            .parse()
            .map_err(|_| "port is not a number from 0 to 65535")?;
        Ok(Self::new(
            StrBytes::from_string(host.to_owned()),
            i32::from(port),
        ))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", &*self.host, self.port)
        } else {
            write!(f, "{}:{}", &*self.host, self.port)
        }
    }
}

/// One Sluice node, as clients and peers see it, with its state at the time
/// it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShotoverNode {
    /// The broker id clients are told.
    pub broker_id: BrokerId,
    /// The rack clients are told.
    pub rack: StrBytes,
    /// Where clients connect.
    pub address_for_clients: Address,
    /// Where other Sluice nodes check this one.
    pub address_for_peers: Address,
    /// Whether the last health check succeeded (always true for the local node).
    pub up: bool,
}

impl ShotoverNode {
    /// Builds a node from its config entry; it starts up.
    pub fn from_config(config: &ShotoverNodeConfig) -> Result<Self, TopologyError> {
        let parse = |field: &'static str, address: &str| {
            Address::parse(address).map_err(|reason| TopologyError::BadAddress {
                broker_id: config.broker_id,
                field,
                address: address.to_owned(),
                reason,
            })
        };
        Ok(Self {
            broker_id: BrokerId(config.broker_id),
            rack: StrBytes::from_string(config.rack.clone()),
            address_for_clients: parse("address_for_clients", &config.address_for_clients)?,
            address_for_peers: parse("address_for_peers", &config.address_for_peers)?,
            up: true,
        })
    }
}

/// What marking a Sluice node up or down did ([`SluiceNodes::set_up`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// No node has that id: nothing changed.
    UnknownNode,
    /// The node already was in that state (or is the local node, which is
    /// never marked down).
    Unchanged,
    /// The node's state changed.
    Changed,
}

impl Marked {
    /// Whether the node's state changed.
    pub fn changed(self) -> bool {
        self == Marked::Changed
    }
}

/// The configured Sluice nodes and their up/down state. Cheap to clone: all
/// clones share the same state.
#[derive(Debug, Clone)]
pub struct SluiceNodes {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Sorted by broker id; `up` fields are ignored in favour of `state`.
    nodes: Vec<ShotoverNode>,
    /// Up flags, parallel to `nodes`.
    state: Vec<AtomicBool>,
    /// Index of the local node in `nodes`.
    local: usize,
    /// Set once, when the local node starts leaving (shutdown).
    leaving: AtomicBool,
    /// When it started leaving.
    leaving_at: OnceLock<Instant>,
}

impl SluiceNodes {
    /// Builds the set from the sink's config.
    pub fn from_config(config: &KafkaSinkClusterConfig) -> Result<Self, TopologyError> {
        let nodes = config
            .shotover_nodes
            .iter()
            .map(ShotoverNode::from_config)
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(nodes, BrokerId(config.local_shotover_broker_id))
    }

    /// Builds the set from nodes (their `up` fields give the initial state)
    /// and the local node's broker id.
    pub fn new(mut nodes: Vec<ShotoverNode>, local: BrokerId) -> Result<Self, TopologyError> {
        if nodes.is_empty() {
            return Err(TopologyError::NoNodes);
        }
        nodes.sort_by_key(|n| n.broker_id);
        if let Some(pair) = nodes.windows(2).find(|w| w[0].broker_id == w[1].broker_id) {
            return Err(TopologyError::DuplicateBrokerId(pair[0].broker_id.0));
        }
        let local = nodes
            .iter()
            .position(|n| n.broker_id == local)
            .ok_or(TopologyError::UnknownLocalNode(local.0))?;
        let state = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| AtomicBool::new(n.up || i == local))
            .collect();
        Ok(Self {
            inner: Arc::new(Inner {
                nodes,
                state,
                local,
                leaving: AtomicBool::new(false),
                leaving_at: OnceLock::new(),
            }),
        })
    }

    /// The local node's broker id.
    pub fn local_id(&self) -> BrokerId {
        self.inner.nodes[self.inner.local].broker_id
    }

    /// The local node's rack (empty when none is configured).
    pub fn local_rack(&self) -> &str {
        &self.inner.nodes[self.inner.local].rack
    }

    /// Marks a node up or down, and says what that did (for the driver to
    /// log). The local node cannot be marked down (it is the one answering);
    /// an unknown id is ignored.
    pub fn set_up(&self, id: BrokerId, up: bool) -> Marked {
        let Some(i) = self.inner.nodes.iter().position(|n| n.broker_id == id) else {
            return Marked::UnknownNode;
        };
        if i == self.inner.local && !up {
            return Marked::Unchanged;
        }
        let was = self.inner.state[i].swap(up, Ordering::Relaxed);
        if was == up {
            Marked::Unchanged
        } else {
            Marked::Changed
        }
    }

    /// The local node starts leaving: from now on it is shown down while
    /// another node is up. Returns whether one is (whether clients have
    /// somewhere to go). `now`: when it started leaving (the first call
    /// counts).
    pub fn set_leaving(&self, now: Instant) -> bool {
        let _ = self.inner.leaving_at.set(now);
        self.inner.leaving.store(true, Ordering::Relaxed);
        self.is_hidden()
    }

    /// How long ago the local node started leaving (`None`: it is not).
    pub fn leaving_for(&self, now: Instant) -> Option<Duration> {
        self.inner
            .leaving_at
            .get()
            .map(|at| now.saturating_duration_since(*at))
    }

    /// Whether requests for leaders and coordinators get leave errors at
    /// `now`: the node is shown down and has been leaving for at least
    /// `errors_after` (by then every peer has seen it gone).
    pub fn answers_leaving(&self, now: Instant, errors_after: Duration) -> bool {
        self.leaving_for(now)
            .is_some_and(|since| since >= errors_after)
            && self.is_hidden()
    }

    /// Whether the local node is leaving and shown down: another node is up.
    pub fn is_hidden(&self) -> bool {
        self.inner.leaving.load(Ordering::Relaxed) && self.peer_up(&self.up_flags())
    }

    /// The up flags, parallel to the nodes, as the health checks left them.
    fn up_flags(&self) -> Vec<bool> {
        self.inner
            .state
            .iter()
            .map(|up| up.load(Ordering::Relaxed))
            .collect()
    }

    fn peer_up(&self, flags: &[bool]) -> bool {
        flags
            .iter()
            .enumerate()
            .any(|(i, up)| *up && i != self.inner.local)
    }

    /// Every node with its current state, sorted by broker id (the local
    /// node down while it leaves and a peer is up).
    pub fn snapshot(&self) -> Vec<ShotoverNode> {
        let mut flags = self.up_flags();
        if self.inner.leaving.load(Ordering::Relaxed) && self.peer_up(&flags) {
            flags[self.inner.local] = false;
        }
        self.inner
            .nodes
            .iter()
            .zip(flags)
            .map(|(node, up)| ShotoverNode { up, ..node.clone() })
            .collect()
    }

    /// The nodes that are up now, sorted by broker id (never empty).
    #[cfg(any(test, feature = "fixtures"))]
    pub fn up_nodes(&self) -> Vec<ShotoverNode> {
        self.snapshot().into_iter().filter(|n| n.up).collect()
    }

    /// Every node but the local one, with its current state: what the peer
    /// health checks watch.
    pub fn peers(&self) -> Vec<ShotoverNode> {
        let local = self.local_id();
        self.snapshot()
            .into_iter()
            .filter(|n| n.broker_id != local)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn config(id: i32, rack: &str, client: &str) -> ShotoverNodeConfig {
        ShotoverNodeConfig {
            address_for_clients: client.to_owned(),
            address_for_peers: format!("10.0.0.{id}:9999"),
            rack: rack.to_owned(),
            broker_id: id,
        }
    }

    fn nodes(local: i32) -> Result<SluiceNodes, TopologyError> {
        let configs = [
            config(2, "b", "sluice-2:9192"),
            config(0, "a", "[::1]:9192"),
            config(1, "a", "sluice-1:9192"),
        ];
        let nodes = configs
            .iter()
            .map(ShotoverNode::from_config)
            .collect::<Result<Vec<_>, _>>()?;
        SluiceNodes::new(nodes, BrokerId(local))
    }

    #[test]
    fn parses_addresses() {
        assert_eq!(Address::parse("h:1").unwrap(), Address::new("h", 1));
        assert_eq!(
            Address::parse("[::1]:9092").unwrap(),
            Address::new("::1", 9092)
        );
        assert_eq!(Address::new("::1", 9092).to_string(), "[::1]:9092");
        assert_eq!(Address::new("h", 9092).to_string(), "h:9092");
        for bad in ["h", ":1", "h:x", "h:70000", "::1:9092", "[::1:9092"] {
            assert!(Address::parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn sorted_by_id_and_local_always_up() {
        let nodes = nodes(1).unwrap();
        let ids: Vec<i32> = nodes.snapshot().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(nodes.local_id(), BrokerId(1));
        assert!(
            !nodes.set_up(BrokerId(1), false).changed(),
            "local node stays up"
        );
        assert!(nodes.set_up(BrokerId(2), false).changed());
        assert!(
            !nodes.set_up(BrokerId(2), false).changed(),
            "no change the second time"
        );
        assert_eq!(nodes.set_up(BrokerId(7), false), Marked::UnknownNode);
        let clone = nodes.clone();
        let up: Vec<i32> = clone.up_nodes().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(up, [0, 1], "state is shared by clones");
        let peers: Vec<i32> = nodes.peers().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(peers, [0, 2]);
        assert!(nodes.set_up(BrokerId(2), true).changed());
        assert_eq!(nodes.up_nodes().len(), 3);
    }

    #[test]
    fn a_leaving_node_is_shown_down_while_a_peer_is_up() {
        let nodes = nodes(1).unwrap();
        assert!(!nodes.is_hidden());
        assert!(nodes.set_up(BrokerId(0), false).changed());
        assert!(nodes.set_up(BrokerId(2), false).changed());
        assert!(
            !nodes.set_leaving(Instant::now()),
            "no peer is up: nowhere for clients to go"
        );
        let up: Vec<i32> = nodes.up_nodes().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(up, [1], "alone, the leaving node is still shown");
        assert!(nodes.set_up(BrokerId(2), true).changed());
        assert!(nodes.is_hidden());
        let up: Vec<i32> = nodes.up_nodes().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(up, [2], "a peer is up: it stands for the leaving node");
        let peers: Vec<i32> = nodes.peers().iter().map(|n| n.broker_id.0).collect();
        assert_eq!(peers, [0, 2], "the health checks go on");
        assert!(nodes.clone().is_hidden(), "shared by clones");
    }

    #[test]
    fn tells_how_long_the_node_has_been_leaving() {
        let nodes = nodes(1).unwrap();
        let start = Instant::now();
        assert_eq!(nodes.leaving_for(start), None);
        assert!(nodes.set_leaving(start));
        let later = start + Duration::from_millis(750);
        assert!(nodes.set_leaving(later), "a second call changes nothing");
        assert_eq!(
            nodes.leaving_for(later + Duration::from_millis(250)),
            Some(Duration::from_secs(1)),
            "counted from the first call"
        );
    }

    #[test]
    fn leave_errors_start_once_the_peers_had_time_to_see_the_node_gone() {
        let nodes = nodes(1).unwrap();
        let start = Instant::now();
        let after = Duration::from_secs(3);
        assert!(!nodes.answers_leaving(start, after), "not leaving");
        assert!(nodes.set_leaving(start));
        assert!(!nodes.answers_leaving(start + Duration::from_secs(2), after));
        assert!(nodes.answers_leaving(start + after, after));
        assert!(nodes.set_up(BrokerId(0), false).changed());
        assert!(nodes.set_up(BrokerId(2), false).changed());
        assert!(
            !nodes.answers_leaving(start + after, after),
            "no peer is up: the node still serves"
        );
    }

    #[test]
    fn rejects_bad_configs() {
        assert!(matches!(nodes(9), Err(TopologyError::UnknownLocalNode(9))));
        assert!(matches!(
            SluiceNodes::new(vec![], BrokerId(0)),
            Err(TopologyError::NoNodes)
        ));
        let a = ShotoverNode::from_config(&config(1, "a", "h:1")).unwrap();
        assert!(matches!(
            SluiceNodes::new(vec![a.clone(), a], BrokerId(1)),
            Err(TopologyError::DuplicateBrokerId(1))
        ));
        let err = ShotoverNode::from_config(&config(3, "a", "nohost")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "shotover node 3: address_for_clients `nohost`: expected host:port"
        );
    }
}
