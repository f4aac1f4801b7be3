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
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

/// The client id sent in every request.
const CLIENT_ID: &str = "sluice-devtools";
/// The ApiVersions version used (flexible, supported by every Kafka >= 2.4).
const API_VERSIONS_VERSION: i16 = 3;
/// The lowest Metadata version that carries a controller id.
const MIN_METADATA_VERSION: i16 = 1;
/// Longest time one attempt (connect + requests) may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Refuse responses larger than this (a sanity bound, not a protocol limit).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// What to wait for.
#[derive(Clone, Debug)]
pub struct Options {
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
pub struct Ready {
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
pub async fn wait(opts: &Options) -> Result<Ready> {
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
    let metadata_max = conn.metadata_max_version().await?;
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
            conn.metadata_max_version().await
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

/// A plain-TCP Kafka connection.
struct Connection {
    /// The address, for messages.
    addr: String,
    /// The socket.
    stream: TcpStream,
    /// Next correlation id.
    correlation_id: i32,
}

impl Connection {
    /// Connects to `addr` (`HOST:PORT`).
    async fn connect(addr: &str) -> Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true).ok();
        Ok(Self {
            addr: addr.to_owned(),
            stream,
            correlation_id: 1,
        })
    }

    /// Sends ApiVersions and returns the highest Metadata version supported.
    async fn metadata_max_version(&mut self) -> Result<i16> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response: ApiVersionsResponse = self.send(request, API_VERSIONS_VERSION).await?;
        if response.error_code != 0 {
            bail!(
                "ApiVersions error code {} from {}",
                response.error_code,
                self.addr
            );
        }
        response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Metadata as i16)
            .map(|k| k.max_version)
            .with_context(|| format!("{} does not list the Metadata API", self.addr))
    }

    /// Sends `request` at `version` and decodes the response.
    async fn send<R: Request>(&mut self, request: R, version: i16) -> Result<R::Response> {
        let correlation_id = self.correlation_id;
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));

        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version))?;
        request.encode(&mut body, version)?;
        let len = i32::try_from(body.len()).context("request too large")?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .await
            .with_context(|| format!("sending to {}", self.addr))?;

        let mut len_buf = [0_u8; 4];
        self.stream
            .read_exact(&mut len_buf)
            .await
            .with_context(|| format!("reading from {} (connection closed?)", self.addr))?;
        let len = usize::try_from(i32::from_be_bytes(len_buf))
            .ok()
            .filter(|&n| n <= MAX_RESPONSE_BYTES)
            .with_context(|| format!("bad response size from {}", self.addr))?;
        let mut payload = vec![0_u8; len];
        self.stream
            .read_exact(&mut payload)
            .await
            .with_context(|| format!("reading from {}", self.addr))?;
        let mut payload = Bytes::from(payload);
        let response_header =
            ResponseHeader::decode(&mut payload, R::Response::header_version(version))?;
        if response_header.correlation_id != correlation_id {
            bail!(
                "{} answered correlation id {} to request {correlation_id}",
                self.addr,
                response_header.correlation_id
            );
        }
        R::Response::decode(&mut payload, version)
    }
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
