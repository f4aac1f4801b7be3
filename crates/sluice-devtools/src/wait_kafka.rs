//! `wait-kafka`: poll a Kafka cluster over plain TCP until it is usable.
//!
//! Each attempt connects to the bootstrap address, sends ApiVersions, then a
//! Metadata request (no topics) at the highest version both sides support.
//! The cluster is ready when the metadata lists at least the wanted number of
//! brokers and a controller id, and every listed broker answers ApiVersions
//! on its advertised address. The whole wait is bounded by a deadline; on
//! timeout the error names what was seen last.

use std::fmt;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::Message;
use tokio::time::{Instant, sleep, timeout};

use crate::client::{Connection, max_version};

/// The lowest Metadata version that carries a controller id.
const MIN_METADATA_VERSION: i16 = 1;
/// Longest time one attempt (connect + requests) may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What to wait for.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Bootstrap address, `HOST:PORT`.
    pub bootstrap: String,
    /// Number of brokers that must be listed.
    pub brokers: usize,
    /// Overall deadline.
    pub timeout: Duration,
    /// Do not report progress on stderr.
    pub quiet: bool,
}

/// A cluster found ready.
#[derive(Clone, Debug)]
pub(crate) struct Ready {
    /// The ids of the listed brokers, sorted.
    pub broker_ids: Vec<i32>,
    /// The controller id from the metadata.
    pub controller_id: i32,
    /// The cluster id, when the broker sent one.
    pub cluster_id: Option<String>,
    /// How long the wait took.
    pub elapsed: Duration,
}

impl fmt::Display for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kafka ready after {:.1}s: {} brokers {:?}, controller {}, cluster id {}",
            self.elapsed.as_secs_f64(),
            self.broker_ids.len(),
            self.broker_ids,
            self.controller_id,
            self.cluster_id.as_deref().unwrap_or("-"),
        )
    }
}

/// The result of one attempt that got answers.
enum Probe {
    /// Ready.
    Ready(Ready),
    /// Answered, but not ready yet: what was seen.
    NotYet(String),
}

/// Polls until the cluster is ready or `opts.timeout` passes.
pub(crate) async fn wait(opts: &Options) -> Result<Ready> {
    let start = Instant::now();
    let deadline = start + opts.timeout;
    let mut last = String::from("no attempt finished");
    loop {
        let now = Instant::now();
        if now >= deadline {
            bail!(
                "kafka at {} not ready after {}s (wanted {} brokers and a controller); last seen: {}",
                opts.bootstrap,
                opts.timeout.as_secs(),
                opts.brokers,
                last
            );
        }
        let budget = (deadline - now).min(ATTEMPT_TIMEOUT);
        let seen = match timeout(budget, probe(&opts.bootstrap, opts.brokers)).await {
            Ok(Ok(Probe::Ready(mut ready))) => {
                ready.elapsed = start.elapsed();
                return Ok(ready);
            }
            Ok(Ok(Probe::NotYet(seen))) => seen,
            Ok(Err(err)) => format!("{err:#}"),
            Err(_) => format!("no answer within {}s", budget.as_secs_f32()),
        };
        if seen != last && !opts.quiet {
            eprintln!("wait-kafka: [{:.1}s] {seen}", start.elapsed().as_secs_f64());
        }
        last = seen;
        let now = Instant::now();
        if now < deadline {
            sleep(POLL_INTERVAL.min(deadline - now)).await;
        }
    }
}

/// One attempt: ApiVersions + Metadata on the bootstrap broker, then
/// ApiVersions on every listed broker.
async fn probe(bootstrap: &str, wanted: usize) -> Result<Probe> {
    let mut conn = Connection::connect(bootstrap).await?;
    let metadata_max = metadata_max_version(&mut conn).await?;
    let version = metadata_max.min(MetadataRequest::VERSIONS.max);
    if version < MIN_METADATA_VERSION {
        bail!("{bootstrap} supports Metadata only up to v{metadata_max}");
    }
    let request = MetadataRequest::default()
        .with_topics(Some(Vec::new()))
        .with_allow_auto_topic_creation(false);
    let metadata: MetadataResponse = conn.send(request, version).await?;
    if metadata.error_code != 0 {
        return Ok(Probe::NotYet(format!(
            "metadata error code {} from {bootstrap}",
            metadata.error_code
        )));
    }
    let mut broker_ids: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    broker_ids.sort_unstable();
    let controller_id = metadata.controller_id.0;
    if broker_ids.len() < wanted {
        return Ok(Probe::NotYet(format!(
            "{} of {wanted} brokers registered (ids {broker_ids:?}, controller {controller_id})",
            broker_ids.len()
        )));
    }
    if controller_id < 0 {
        return Ok(Probe::NotYet(format!(
            "{} brokers registered (ids {broker_ids:?}) but no controller yet",
            broker_ids.len()
        )));
    }
    for broker in &metadata.brokers {
        let addr = format!("{}:{}", broker.host.as_str(), broker.port);
        let answered = async {
            let mut conn = Connection::connect(&addr).await?;
            metadata_max_version(&mut conn).await
        }
        .await;
        if let Err(err) = answered {
            return Ok(Probe::NotYet(format!(
                "broker {} at {addr} listed but not answering: {err:#}",
                broker.node_id.0
            )));
        }
    }
    Ok(Probe::Ready(Ready {
        broker_ids,
        controller_id,
        cluster_id: metadata.cluster_id.map(|id| id.as_str().to_owned()),
        elapsed: Duration::ZERO,
    }))
}

/// Sends ApiVersions and returns the highest Metadata version supported.
async fn metadata_max_version(conn: &mut Connection) -> Result<i16> {
    let versions = conn.api_versions().await?;
    max_version(&versions, ApiKey::Metadata)
        .with_context(|| format!("{} does not list the Metadata API", conn.addr()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn times_out_with_the_last_error() {
        // Bind then drop a listener so the port is (very likely) closed.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let opts = Options {
            bootstrap: addr.to_string(),
            brokers: 1,
            timeout: Duration::from_secs(1),
            quiet: true,
        };
        let err = wait(&opts).await.unwrap_err().to_string();
        assert!(err.contains("not ready after 1s"), "{err}");
        assert!(err.contains("connecting to"), "{err}");
    }
}
