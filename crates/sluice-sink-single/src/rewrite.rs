//! Address rewrites that keep clients talking through Sluice.
//!
//! A client learns broker addresses from Metadata, FindCoordinator and
//! DescribeCluster responses. If it saw the real ones it would connect to the
//! brokers directly and bypass Sluice, so every advertised broker address is
//! replaced with the address the client used to reach Sluice. Only these
//! responses are decoded; everything else passes through as raw bytes.

use std::net::SocketAddr;

use sluice_codec::kafka_protocol::messages::{
    DescribeClusterResponse, FindCoordinatorResponse, MetadataResponse,
};
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, CodecError, Response, ResponseKind};

/// Where clients must connect: Sluice's own address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdvertisedAddress {
    /// Host as written into responses (an IP literal, without brackets).
    pub(crate) host: StrBytes,
    /// Port as written into responses.
    pub(crate) port: i32,
}

impl AdvertisedAddress {
    /// The address a client connected to. IPv4-mapped IPv6 addresses are
    /// written as plain IPv4.
    pub(crate) fn from_socket_addr(addr: SocketAddr) -> Self {
        Self {
            host: StrBytes::from_string(addr.ip().to_canonical().to_string()),
            port: i32::from(addr.port()),
        }
    }
}

/// Rewrites the broker addresses in `response` if it is one that carries
/// them; leaves every other response undecoded. Returns whether the
/// response was decoded for rewriting.
pub(crate) fn rewrite_response(
    response: &mut Response,
    to: &AdvertisedAddress,
) -> Result<bool, CodecError> {
    if !matches!(
        response.api_key(),
        ApiKey::Metadata | ApiKey::FindCoordinator | ApiKey::DescribeCluster
    ) {
        return Ok(false);
    }
    let version = response.api_version();
    match response.body_mut()? {
        ResponseKind::Metadata(body) => rewrite_metadata(body, to),
        ResponseKind::FindCoordinator(body) => rewrite_find_coordinator(body, version, to),
        ResponseKind::DescribeCluster(body) => rewrite_describe_cluster(body, to),
        _ => {}
    }
    Ok(true)
}

/// Every broker in a Metadata response.
pub(crate) fn rewrite_metadata(body: &mut MetadataResponse, to: &AdvertisedAddress) {
    for broker in &mut body.brokers {
        broker.host = to.host.clone();
        broker.port = to.port;
    }
}

/// The coordinator of a FindCoordinator response of `version`: the single
/// `host`/`port` of v0-3, or each entry of the `coordinators` list of v4+
/// (fields of the other versions must stay unset to encode). A coordinator
/// that was not found (node id -1) is left as the broker sent it.
pub(crate) fn rewrite_find_coordinator(
    body: &mut FindCoordinatorResponse,
    version: i16,
    to: &AdvertisedAddress,
) {
    if version <= 3 {
        if body.node_id.0 >= 0 {
            body.host = to.host.clone();
            body.port = to.port;
        }
        return;
    }
    for coordinator in &mut body.coordinators {
        if coordinator.node_id.0 >= 0 {
            coordinator.host = to.host.clone();
            coordinator.port = to.port;
        }
    }
}

/// Every broker in a DescribeCluster response.
pub(crate) fn rewrite_describe_cluster(body: &mut DescribeClusterResponse, to: &AdvertisedAddress) {
    for broker in &mut body.brokers {
        broker.host = to.host.clone();
        broker.port = to.port;
    }
}
