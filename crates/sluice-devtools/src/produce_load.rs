//! `produce-load`: many client connections, a few of them producing at a low
//! rate, for measuring what connections and small requests cost a proxy
//! (the clients phase of `scripts/bench`).
//!
//! It reads the topic's metadata at the bootstrap address, then opens
//! `total` connections, each asking ApiVersions: the first `active` to the
//! leader of partition `i mod partitions` (as a producer does), the others
//! to the listed nodes in turn. Once every one is open it prints `ready`,
//! and each active connection sends one Produce (one record of
//! `record_size` bytes, acks=1) every `1 / rate` seconds on a fixed
//! schedule, the connections' schedules spread over the interval, one
//! request in flight each. Requests scheduled in the `seconds` after a
//! `warmup_secs` warm-up are counted: their time from write to answer read.
//! The run fails on any error code, a connection the peer closes, a request
//! unanswered within `REQUEST_TIMEOUT`, or fewer answers than scheduled.
//! The CPU ticks of `cpu_pids` are read at the window's edges and the RSS
//! of `rss_pids` once every connection is open and at the window's end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};

use crate::client::{Connection, max_version};
use crate::{hold, procstat};

/// The highest Produce version sent (v13 names topics by id).
const MAX_PRODUCE_VERSION: i16 = 12;
/// Longest wait for one Produce answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time between `ready` and the first scheduled request.
const START_DELAY: Duration = Duration::from_millis(500);

/// What to open and how to load it.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Bootstrap address, `HOST:PORT`.
    pub bootstrap: String,
    /// The topic produced to.
    pub topic: String,
    /// Connections in all.
    pub total: usize,
    /// Connections that produce.
    pub active: usize,
    /// Produce requests per second per active connection.
    pub rate: f64,
    /// Bytes of each record's value.
    pub record_size: usize,
    /// Uncounted seconds of load before the counted ones.
    pub warmup: Duration,
    /// Counted seconds.
    pub window: Duration,
    /// Connections being set up at once at most.
    pub concurrency: usize,
    /// Opening every connection must finish within this.
    pub open_timeout: Duration,
    /// Processes whose CPU ticks are read at the window's edges.
    pub cpu_pids: Vec<u32>,
    /// Processes whose RSS is read when all are open and at the window's end.
    pub rss_pids: Vec<u32>,
}

/// The topic as the bootstrap shows it.
struct Layout {
    /// Each partition's leader address, by partition.
    leaders: Vec<String>,
    /// Every listed node's address.
    nodes: Vec<String>,
    /// The Produce version to send.
    produce_version: i16,
}

/// One active connection's schedule and results.
struct Load {
    /// Time of the first scheduled request.
    first: Instant,
    /// Requests scheduled from this on are counted...
    counted_from: Instant,
    /// ...up to this.
    counted_until: Instant,
}

/// Opens, loads, measures; returns one tab-separated line: `clients`, total,
/// active, counted requests, p50 ms, p99 ms, max ms, CPU ticks, RSS KiB
/// when open, RSS KiB at the end, counted seconds.
pub(crate) async fn run(opts: &Options) -> Result<String> {
    if opts.active > opts.total || opts.rate <= 0.0 || opts.window.is_zero() {
        bail!("need --active <= --total, --rate > 0 and --seconds > 0");
    }
    hold::raise_nofile(opts.total)?;
    let layout = layout(opts).await?;
    let conns = open_all(opts, &layout).await?;
    let rss_open = procstat::rss_kb(&opts.rss_pids)?;
    println!("ready {}", opts.total);
    let first = Instant::now() + START_DELAY;
    let load = Arc::new(Load {
        first,
        counted_from: first + opts.warmup,
        counted_until: first + opts.warmup + opts.window,
    });
    let closed_by_peer = Arc::new(AtomicUsize::new(0));
    let mut active = JoinSet::new();
    let mut idle = JoinSet::new();
    let interval = Duration::from_secs_f64(1.0 / opts.rate);
    for (i, conn) in conns.into_iter().enumerate() {
        if i < opts.active {
            let partition = i % layout.leaders.len();
            let offset = interval.mul_f64(i as f64 / opts.active as f64);
            let batch = record_batch(opts.record_size)?;
            let request = produce_request(&opts.topic, partition, batch);
            active.spawn(produce(
                conn,
                request,
                layout.produce_version,
                interval,
                offset,
                load.clone(),
            ));
        } else {
            idle.spawn(watch(conn.into_stream(), closed_by_peer.clone()));
        }
    }
    sleep_until(load.counted_from).await;
    let ticks_before = procstat::cpu_ticks(&opts.cpu_pids)?;
    sleep_until(load.counted_until).await;
    let ticks = procstat::cpu_ticks(&opts.cpu_pids)? - ticks_before;
    let rss_end = procstat::rss_kb(&opts.rss_pids)?;
    let mut millis = Vec::new();
    while let Some(done) = active.join_next().await {
        millis.extend(done.context("a producing connection's task failed")??);
    }
    idle.shutdown().await;
    let closed = closed_by_peer.load(Ordering::Relaxed);
    if closed > 0 {
        bail!(
            "the peer closed {closed} of the {} idle connections",
            opts.total - opts.active
        );
    }
    millis.sort_by(f64::total_cmp);
    Ok(format!(
        "clients\t{}\t{}\t{}\t{:.3}\t{:.3}\t{:.3}\t{ticks}\t{rss_open}\t{rss_end}\t{:.3}",
        opts.total,
        opts.active,
        millis.len(),
        procstat::percentile(&millis, 0.50),
        procstat::percentile(&millis, 0.99),
        millis.last().copied().unwrap_or_default(),
        opts.window.as_secs_f64(),
    ))
}

/// The topic's partition leaders and the listed nodes, from the bootstrap.
async fn layout(opts: &Options) -> Result<Layout> {
    let mut conn = Connection::connect(&opts.bootstrap).await?;
    let versions = conn.api_versions().await?;
    let produce_version = max_version(&versions, ApiKey::Produce)
        .map(|v| v.min(MAX_PRODUCE_VERSION))
        .filter(|v| *v >= 3)
        .with_context(|| format!("{} lists no Produce version >= 3", opts.bootstrap))?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(opts.topic.clone())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let metadata: MetadataResponse = conn.send(request, 9).await?;
    let nodes: BTreeMap<i32, String> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
        .collect();
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == opts.topic))
        .filter(|t| t.error_code == 0 && !t.partitions.is_empty())
        .with_context(|| {
            format!(
                "{} does not list topic {} without error",
                opts.bootstrap, opts.topic
            )
        })?;
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    let leaders = partitions
        .iter()
        .map(|p| {
            nodes.get(&p.leader_id.0).cloned().with_context(|| {
                format!(
                    "partition {} of {} has no listed leader ({})",
                    p.partition_index, opts.topic, p.leader_id.0
                )
            })
        })
        .collect::<Result<_>>()?;
    Ok(Layout {
        leaders,
        nodes: nodes.into_values().collect(),
        produce_version,
    })
}

/// Opens every connection (ApiVersions on each) within the open timeout.
async fn open_all(opts: &Options, layout: &Layout) -> Result<Vec<Connection>> {
    let permits = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let mut opening = JoinSet::new();
    for i in 0..opts.total {
        let addr = if i < opts.active {
            layout.leaders[i % layout.leaders.len()].clone()
        } else {
            layout.nodes[i % layout.nodes.len()].clone()
        };
        let permits = permits.clone();
        opening.spawn(async move {
            let _permit = permits.acquire_owned().await.context("opening stopped")?;
            let mut conn = Connection::connect(&addr).await?;
            conn.api_versions().await?;
            anyhow::Ok((i, conn))
        });
    }
    let deadline = Instant::now() + opts.open_timeout;
    let mut conns = BTreeMap::new();
    while let Some(next) = timeout_at(deadline, opening.join_next())
        .await
        .with_context(|| {
            format!(
                "{} of {} connections opened within {}s",
                conns.len(),
                opts.total,
                opts.open_timeout.as_secs()
            )
        })?
    {
        let (i, conn) = next.context("a connection task failed")??;
        conns.insert(i, conn);
    }
    Ok(conns.into_values().collect())
}

/// One record of `size` bytes, as a record batch (magic 2, uncompressed).
fn record_batch(size: usize) -> Result<Bytes> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default(),
        key: None,
        value: Some(Bytes::from(vec![b'x'; size])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).context("encoding a record batch")?;
    Ok(buf.freeze())
}

/// A Produce (acks=1) of `batch` to one partition.
fn produce_request(topic: &str, partition: usize, batch: Bytes) -> ProduceRequest {
    let data = PartitionProduceData::default()
        .with_index(i32::try_from(partition).unwrap_or(i32::MAX))
        .with_records(Some(batch));
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_data(vec![data]),
        ])
}

/// Sends `request` on its schedule until the window ends; returns the
/// counted requests' times in ms.
async fn produce(
    mut conn: Connection,
    request: ProduceRequest,
    version: i16,
    interval: Duration,
    offset: Duration,
    load: Arc<Load>,
) -> Result<Vec<f64>> {
    let mut millis = Vec::new();
    let mut at = load.first + offset;
    while at < load.counted_until {
        sleep_until(at).await;
        let started = Instant::now();
        let correlation_id = conn.write(request.clone(), version).await?;
        let frame = timeout(REQUEST_TIMEOUT, conn.read_frame())
            .await
            .with_context(|| {
                format!(
                    "no Produce answer from {} within {}s",
                    conn.addr(),
                    REQUEST_TIMEOUT.as_secs()
                )
            })??;
        let took = started.elapsed();
        let answer = conn.decode::<ProduceRequest>(frame, correlation_id, version)?;
        for p in answer.responses.iter().flat_map(|t| &t.partition_responses) {
            if p.error_code != 0 {
                bail!(
                    "Produce to partition {} via {} answered error code {}",
                    p.index,
                    conn.addr(),
                    p.error_code
                );
            }
        }
        if answer
            .responses
            .iter()
            .map(|t| t.partition_responses.len())
            .sum::<usize>()
            != 1
        {
            bail!(
                "Produce via {} answered for other than the one partition sent",
                conn.addr()
            );
        }
        if at >= load.counted_from {
            millis.push(took.as_secs_f64() * 1e3);
        }
        at += interval;
    }
    Ok(millis)
}

/// Holds `stream` until aborted; counts it once when the peer closes it.
async fn watch(mut stream: TcpStream, closed_by_peer: Arc<AtomicUsize>) {
    let mut buf = [0_u8; 64];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => {
                closed_by_peer.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(_) => {}
        }
    }
}
