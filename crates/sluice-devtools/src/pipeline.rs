//! `pipeline-fetch`: a hostile consumer that asks for a lot and never
//! reads (the memory phase of `scripts/bench`).
//!
//! On one connection to the bootstrap address (a Sluice node that fronts
//! the cluster, so it leads every partition it shows) it sends ApiVersions
//! and Metadata for the topic. Then it writes `requests` Fetch requests
//! back to back, each for every partition of the topic from offset 0, with
//! `max_bytes` as the request's limit and as every partition's limit, and
//! `max_wait_ms` 0. It never reads its socket again, and holds the
//! connection until released (see [`crate::hold`]).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Message, StrBytes};
use tokio::time::timeout;

use crate::client::{Connection, max_version};
use crate::hold;

/// The lowest Fetch version Kafka 4 serves.
const MIN_FETCH_VERSION: i16 = 4;
/// The first Fetch version that names topics by id.
const FETCH_TOPIC_ID_VERSION: i16 = 13;
/// The Metadata version asked (it carries topic ids).
const METADATA_VERSION: i16 = 12;

/// What to ask for and how long to hold.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// A Sluice node, `HOST:PORT`.
    pub bootstrap: String,
    /// The topic to fetch.
    pub topic: String,
    /// Fetch requests to write.
    pub requests: usize,
    /// `max_bytes` of each request and of each partition in it.
    pub max_bytes: i32,
    /// The setup (connect, ApiVersions, Metadata, writes) must finish within this.
    pub setup_timeout: Duration,
    /// Let go after this long at most.
    pub longest_hold: Duration,
    /// Let go when standard input closes.
    pub watch_stdin: bool,
}

/// Writes the fetches, then holds the connection without reading.
pub(crate) async fn run(opts: &Options) -> Result<String> {
    let (conn, sent) = timeout(opts.setup_timeout, send_fetches(opts))
        .await
        .with_context(|| {
            format!(
                "setting up the pipelining client on {} took over {}s",
                opts.bootstrap,
                opts.setup_timeout.as_secs()
            )
        })??;
    println!("{sent}");
    let released = hold::until_released(opts.watch_stdin, opts.longest_hold).await?;
    drop(conn);
    Ok(format!("released the connection ({released})"))
}

/// Connects and writes the fetches; returns the connection and what was sent.
async fn send_fetches(opts: &Options) -> Result<(Connection, String)> {
    let mut conn = Connection::connect(&opts.bootstrap).await?;
    let versions = conn.api_versions().await?;
    let fetch_version = max_version(&versions, ApiKey::Fetch)
        .map(|v| v.min(FetchRequest::VERSIONS.max))
        .filter(|v| *v >= MIN_FETCH_VERSION)
        .with_context(|| format!("{} lists no Fetch version >= 4", opts.bootstrap))?;
    let topic = topic_to_fetch(&mut conn, &opts.topic, fetch_version, opts.max_bytes).await?;
    let partitions = topic.partitions.len();
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(opts.max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![topic]);
    for _ in 0..opts.requests {
        conn.write(request.clone(), fetch_version).await?;
    }
    let sent = format!(
        "sent {} Fetch v{fetch_version} requests ({partitions} partitions of {}, max_bytes {} each) on one connection; not reading",
        opts.requests, opts.topic, opts.max_bytes
    );
    Ok((conn, sent))
}

/// Every partition of `topic` from offset 0, each allowed `max_bytes`;
/// checks that one node leads them all.
async fn topic_to_fetch(
    conn: &mut Connection,
    topic: &str,
    version: i16,
    max_bytes: i32,
) -> Result<FetchTopic> {
    let name = TopicName(StrBytes::from_string(topic.to_owned()));
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name.clone())),
        ]))
        .with_allow_auto_topic_creation(false);
    let metadata: MetadataResponse = conn.send(request, METADATA_VERSION).await?;
    let Some(found) = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
    else {
        bail!("{} does not list topic {topic}", conn.addr());
    };
    if found.error_code != 0 || found.partitions.is_empty() {
        bail!(
            "{} lists topic {topic} with error code {} and {} partitions",
            conn.addr(),
            found.error_code,
            found.partitions.len()
        );
    }
    let leaders: BTreeSet<i32> = found.partitions.iter().map(|p| p.leader_id.0).collect();
    if leaders.len() != 1 || leaders.contains(&-1) {
        bail!(
            "the partitions of {topic} have leaders {leaders:?}, not one node: point --bootstrap at a Sluice node that fronts the cluster"
        );
    }
    let partitions = found
        .partitions
        .iter()
        .map(|p| {
            FetchPartition::default()
                .with_partition(p.partition_index)
                .with_fetch_offset(0)
                .with_partition_max_bytes(max_bytes)
        })
        .collect();
    let fetched = FetchTopic::default().with_partitions(partitions);
    Ok(if version >= FETCH_TOPIC_ID_VERSION {
        fetched.with_topic_id(found.topic_id)
    } else {
        fetched.with_topic(name)
    })
}
