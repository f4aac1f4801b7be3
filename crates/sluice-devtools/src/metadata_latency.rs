//! `metadata-latency`: how long a full Metadata request (every topic) takes,
//! and what it costs the process that answers it (the partitions phase of
//! `scripts/bench`).
//!
//! On one connection it sends ApiVersions, then `warmup` uncounted and
//! `requests` counted Metadata requests for all topics, one at a time. Each
//! request's time runs from writing it to having read the whole answer;
//! decoding it comes after. Every answer must list exactly
//! `expect_partitions` partitions, without error, in the topics named
//! `topic_prefix`*, so that a measurement never counts a cluster smaller
//! than asked. With `cpu_pids`, their CPU ticks are read right before the
//! first and right after the last counted request.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::Message;
use tokio::time::timeout;

use crate::client::{Connection, max_version};
use crate::procstat;

/// The Metadata version asked at most (v12 and v13 differ only in errors).
const METADATA_VERSION: i16 = 12;

/// What to ask and what to expect.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Where to connect, `HOST:PORT`.
    pub bootstrap: String,
    /// Counted requests.
    pub requests: usize,
    /// Uncounted requests before them.
    pub warmup: usize,
    /// Partitions every answer must list in the topics named `topic_prefix`*.
    pub expect_partitions: usize,
    /// The measured topics' common prefix.
    pub topic_prefix: String,
    /// Processes whose CPU ticks are read around the counted requests.
    pub cpu_pids: Vec<u32>,
    /// The whole run must finish within this.
    pub run_timeout: Duration,
}

/// Runs the requests; returns one tab-separated line: `metadata`, counted
/// requests, p50 ms, p99 ms, max ms, answer bytes, partitions, CPU ticks.
pub(crate) async fn run(opts: &Options) -> Result<String> {
    if opts.requests == 0 {
        bail!("--requests must be > 0");
    }
    timeout(opts.run_timeout, measure(opts))
        .await
        .with_context(|| {
            format!(
                "{} Metadata requests to {} took over {}s",
                opts.warmup + opts.requests,
                opts.bootstrap,
                opts.run_timeout.as_secs()
            )
        })?
}

/// The requests, timed.
async fn measure(opts: &Options) -> Result<String> {
    let mut conn = Connection::connect(&opts.bootstrap).await?;
    let versions = conn.api_versions().await?;
    let version = max_version(&versions, ApiKey::Metadata)
        .map(|v| v.min(METADATA_VERSION).min(MetadataRequest::VERSIONS.max))
        .filter(|v| *v >= 1)
        .with_context(|| format!("{} lists no Metadata version >= 1", opts.bootstrap))?;
    // topics: null asks for every topic.
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let mut millis = Vec::with_capacity(opts.requests);
    let mut bytes = 0;
    let mut ticks_before = 0;
    for i in 0..opts.warmup + opts.requests {
        if i == opts.warmup {
            ticks_before = procstat::cpu_ticks(&opts.cpu_pids)?;
        }
        let started = Instant::now();
        let correlation_id = conn.write(request.clone(), version).await?;
        let frame = conn.read_frame().await?;
        let took = started.elapsed();
        bytes = frame.len();
        if i >= opts.warmup {
            millis.push(took.as_secs_f64() * 1e3);
        }
        // Checked after the clock stopped; the next request waits for it.
        let answer = conn.decode::<MetadataRequest>(frame, correlation_id, version)?;
        check(&answer, opts)?;
    }
    let ticks = procstat::cpu_ticks(&opts.cpu_pids)? - ticks_before;
    millis.sort_by(f64::total_cmp);
    Ok(format!(
        "metadata\t{}\t{:.3}\t{:.3}\t{:.3}\t{bytes}\t{}\t{ticks}",
        millis.len(),
        procstat::percentile(&millis, 0.50),
        procstat::percentile(&millis, 0.99),
        millis.last().copied().unwrap_or_default(),
        opts.expect_partitions,
    ))
}

/// Fails unless the answer lists the expected partitions, all without error.
fn check(answer: &MetadataResponse, opts: &Options) -> Result<()> {
    let mut partitions = 0;
    for topic in &answer.topics {
        let Some(name) = topic.name.as_ref() else {
            continue;
        };
        if !name.0.as_str().starts_with(&opts.topic_prefix) {
            continue;
        }
        if topic.error_code != 0 {
            bail!(
                "Metadata lists {} with error code {}",
                name.0,
                topic.error_code
            );
        }
        if let Some(p) = topic
            .partitions
            .iter()
            .find(|p| p.error_code != 0 || p.leader_id.0 < 0)
        {
            bail!(
                "Metadata lists {} partition {} with error code {} and leader {}",
                name.0,
                p.partition_index,
                p.error_code,
                p.leader_id.0
            );
        }
        partitions += topic.partitions.len();
    }
    if partitions != opts.expect_partitions {
        bail!(
            "Metadata from {} lists {partitions} partitions in topics {}*, not {}",
            opts.bootstrap,
            opts.topic_prefix,
            opts.expect_partitions
        );
    }
    Ok(())
}
