//! A blocking Kafka client over TLS that shows which certificate the server
//! presented: enough to tell a connection made before a reload from one
//! made after.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use sluice_codec::kafka_protocol::messages::ApiVersionsRequest;
use sluice_codec::kafka_protocol::protocol::StrBytes;
use sluice_codec::{ApiKey, RequestKind, Response, ResponseKind};
use sluice_testkit::raw::encode;

/// One TLS connection to a Sluice listener.
pub(crate) struct TlsClient {
    stream: StreamOwned<ClientConnection, TcpStream>,
    next_correlation_id: i32,
}

impl TlsClient {
    /// Connects to `addr` (`127.0.0.1:port`), trusting only `ca_pem`, and
    /// completes the handshake; `Err` when it fails.
    pub(crate) fn connect(addr: &str, ca_pem: &str) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
        let connection =
            ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        let tcp = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut stream = StreamOwned::new(connection, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| format!("tls handshake with {addr}: {e}"))?;
        }
        Ok(Self {
            stream,
            next_correlation_id: 1,
        })
    }

    /// The leaf certificate the server presented, DER.
    pub(crate) fn server_certificate(&self) -> Vec<u8> {
        self.stream
            .conn
            .peer_certificates()
            .and_then(|certs| certs.first())
            .expect("the server presented a certificate")
            .to_vec()
    }

    /// Asks ApiVersions (v3) on this connection; returns its error code.
    pub(crate) fn api_versions(&mut self) -> i16 {
        let body = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("tls-reload-test"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        match self.request(ApiKey::ApiVersions, 3, RequestKind::ApiVersions(body)) {
            ResponseKind::ApiVersions(answer) => answer.error_code,
            other => panic!("not an ApiVersions answer: {other:?}"),
        }
    }

    fn request(&mut self, api: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        self.stream
            .write_all(&encode(api, version, id, body))
            .expect("write the request");
        self.stream.flush().expect("flush the request");
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .expect("read the answer's length");
        let mut frame = vec![0u8; usize::try_from(i32::from_be_bytes(len)).expect("length")];
        self.stream.read_exact(&mut frame).expect("read the answer");
        let response =
            Response::parse(BytesMut::from(&frame[..]), api, version).expect("parse the answer");
        assert_eq!(response.correlation_id(), id, "correlation id of {api:?}");
        response.into_body().expect("decode the answer")
    }
}
