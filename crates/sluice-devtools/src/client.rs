//! A minimal plain-TCP Kafka client for the devtools: one request at a time
//! with its response ([`Connection::send`]), or requests written without
//! reading anything back ([`Connection::write`]), for clients that misbehave
//! on purpose.

use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The client id sent in every request.
pub(crate) const CLIENT_ID: &str = "sluice-devtools";
/// The ApiVersions version used (flexible, supported by every Kafka >= 2.4).
pub(crate) const API_VERSIONS_VERSION: i16 = 3;
/// Refuse responses larger than this (a sanity bound, not a protocol limit).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// A plain-TCP Kafka connection.
pub(crate) struct Connection {
    /// The address, for messages.
    addr: String,
    /// The socket.
    stream: TcpStream,
    /// Next correlation id.
    correlation_id: i32,
}

impl Connection {
    /// Connects to `addr` (`HOST:PORT`).
    pub(crate) async fn connect(addr: &str) -> Result<Self> {
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

    /// The address connected to.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// The socket, for holding it open once the requests are done.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Sends ApiVersions (v3) and returns the answer, failing on an error code.
    pub(crate) async fn api_versions(&mut self) -> Result<ApiVersionsResponse> {
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
        Ok(response)
    }

    /// Sends `request` at `version` and decodes the response.
    pub(crate) async fn send<R: Request>(
        &mut self,
        request: R,
        version: i16,
    ) -> Result<R::Response> {
        let correlation_id = self.write(request, version).await?;
        let frame = self.read_frame().await?;
        self.decode::<R>(frame, correlation_id, version)
    }

    /// Reads one response frame (without its length prefix), undecoded.
    pub(crate) async fn read_frame(&mut self) -> Result<Bytes> {
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
        Ok(Bytes::from(payload))
    }

    /// Decodes `frame`, the answer to the request `R` at `version` that
    /// went out with `correlation_id`.
    pub(crate) fn decode<R: Request>(
        &self,
        mut frame: Bytes,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response> {
        let response_header =
            ResponseHeader::decode(&mut frame, R::Response::header_version(version))?;
        if response_header.correlation_id != correlation_id {
            bail!(
                "{} answered correlation id {} to request {correlation_id}",
                self.addr,
                response_header.correlation_id
            );
        }
        R::Response::decode(&mut frame, version)
    }

    /// Writes `request` at `version` without reading anything; returns its
    /// correlation id.
    pub(crate) async fn write<R: Request>(&mut self, request: R, version: i16) -> Result<i32> {
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
        Ok(correlation_id)
    }
}

/// The highest version of `api` an ApiVersions answer lists.
pub(crate) fn max_version(versions: &ApiVersionsResponse, api: ApiKey) -> Option<i16> {
    versions
        .api_keys
        .iter()
        .find(|k| k.api_key == api as i16)
        .map(|k| k.max_version)
}
