//! The `DebugPrinter` transform: logs every request and response.
//!
//! At `debug` level (target `sluice_chain::debug_printer`) it prints one line
//! per message from the header alone: api key, version, correlation id,
//! client id and size. Bodies are decoded only when `trace` is enabled for
//! that target, and then printed in full, except for the messages that carry
//! credentials (SASL exchanges, delegation-token HMACs, SCRAM credentials),
//! which are never printed. Decoding for the print does not mark the message
//! dirty, so it still leaves Sluice as its original bytes.

use sluice_codec::{ApiKey, Request, Response};
use tracing::{Level, debug, trace};

use crate::{ChainError, ConnectionContext, Transform, TransformBuilder};

/// Builds a `DebugPrinter` for each client connection.
#[derive(Debug, Clone, Default)]
pub struct DebugPrinterBuilder;

impl DebugPrinterBuilder {
    /// A builder; the transform has no settings.
    pub fn new() -> Self {
        Self
    }
}

impl TransformBuilder for DebugPrinterBuilder {
    fn build(&self, _ctx: &ConnectionContext) -> Box<dyn Transform> {
        Box::new(DebugPrinter)
    }
}

/// Logs each request and response; changes nothing.
#[derive(Debug)]
pub(crate) struct DebugPrinter;

impl Transform for DebugPrinter {
    fn name(&self) -> &str {
        "DebugPrinter"
    }

    fn on_request(
        &mut self,
        request: &mut Request,
        ctx: &ConnectionContext,
    ) -> Result<(), ChainError> {
        if !tracing::enabled!(Level::DEBUG) {
            return Ok(());
        }
        let header = request.header();
        debug!(
            connection = ctx.connection_id,
            api = ?header.api_key,
            version = header.api_version,
            correlation_id = header.correlation_id,
            client_id = %header.client_id_lossy(),
            size = request.wire_len(),
            "request"
        );
        if tracing::enabled!(Level::TRACE) {
            let (api, correlation_id) = (request.api_key(), request.correlation_id());
            if carries_secrets(api) {
                trace!(
                    connection = ctx.connection_id,
                    correlation_id, "request body: (redacted)"
                );
            } else {
                match request.body() {
                    Ok(body) => trace!(
                        connection = ctx.connection_id,
                        correlation_id, "request body: {body:?}"
                    ),
                    Err(e) => trace!(
                        connection = ctx.connection_id,
                        correlation_id, "request body not decodable: {e}"
                    ),
                }
            }
        }
        Ok(())
    }

    fn on_response(
        &mut self,
        response: &mut Response,
        ctx: &ConnectionContext,
    ) -> Result<(), ChainError> {
        if !tracing::enabled!(Level::DEBUG) {
            return Ok(());
        }
        debug!(
            connection = ctx.connection_id,
            api = ?response.api_key(),
            version = response.api_version(),
            correlation_id = response.correlation_id(),
            size = response.wire_len(),
            rewritten = response.is_dirty(),
            "response"
        );
        if tracing::enabled!(Level::TRACE) {
            let (api, correlation_id) = (response.api_key(), response.correlation_id());
            if carries_secrets(api) {
                trace!(
                    connection = ctx.connection_id,
                    correlation_id, "response body: (redacted)"
                );
            } else {
                match response.body() {
                    Ok(body) => trace!(
                        connection = ctx.connection_id,
                        correlation_id, "response body: {body:?}"
                    ),
                    Err(e) => trace!(
                        connection = ctx.connection_id,
                        correlation_id, "response body not decodable: {e}"
                    ),
                }
            }
        }
        Ok(())
    }
}

/// Messages whose request or response may hold a password, a SASL proof, a
/// token HMAC or SCRAM credentials; config changes carry config values,
/// which for dynamic broker and topic configs can be passwords
/// (`sasl.jaas.config`, `ssl.keystore.password`, ...).
fn carries_secrets(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::SaslAuthenticate
            | ApiKey::AlterConfigs
            | ApiKey::IncrementalAlterConfigs
            | ApiKey::CreateTopics
            | ApiKey::CreateDelegationToken
            | ApiKey::RenewDelegationToken
            | ApiKey::ExpireDelegationToken
            | ApiKey::DescribeDelegationToken
            | ApiKey::AlterUserScramCredentials
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use bytes::Bytes;
    use sluice_codec::kafka_protocol::messages::{
        ApiVersionsRequest, RequestKind, SaslAuthenticateRequest,
    };
    use sluice_codec::kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::test_support::{Logs, context, request};

    #[test]
    fn passes_messages_through_unchanged() {
        let ctx = context("127.0.0.1:9192".parse().unwrap());
        let mut request = request(
            ApiKey::ApiVersions,
            3,
            7,
            RequestKind::ApiVersions(ApiVersionsRequest::default()),
        );
        let mut printer = DebugPrinterBuilder::new().build(&ctx);
        assert_eq!(printer.name(), "DebugPrinter");
        printer.on_request(&mut request, &ctx).unwrap();
        assert!(!request.is_dirty());
        assert_eq!(request.correlation_id(), 7);
        assert!(carries_secrets(ApiKey::SaslAuthenticate));
        for api in [
            ApiKey::AlterConfigs,
            ApiKey::IncrementalAlterConfigs,
            ApiKey::CreateTopics,
        ] {
            assert!(carries_secrets(api), "{api:?} carries config values");
        }
        assert!(!carries_secrets(ApiKey::Produce));
    }

    #[test]
    fn prints_headers_and_bodies_but_never_credentials() {
        let ctx = context("127.0.0.1:9192".parse().unwrap());
        let mut printer = DebugPrinterBuilder::new().build(&ctx);
        let mut versions = request(
            ApiKey::ApiVersions,
            3,
            7317,
            RequestKind::ApiVersions(
                ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("test-client")),
            ),
        );
        let mut sasl = request(
            ApiKey::SaslAuthenticate,
            2,
            7318,
            RequestKind::SaslAuthenticate(
                SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from_static(b"\0alice\0hunter2-secret")),
            ),
        );
        let logs = Logs::global();
        printer.on_request(&mut versions, &ctx).unwrap();
        printer.on_request(&mut sasl, &ctx).unwrap();
        let versions_lines = logs.lines_with("correlation_id=7317");
        let out = versions_lines.join("\n");
        assert!(
            out.contains("api=ApiVersions version=3 correlation_id=7317"),
            "{out}"
        );
        assert!(out.contains("test-client"), "body printed at trace: {out}");
        let out = logs.lines_with("correlation_id=7318").join("\n");
        assert!(out.contains("api=SaslAuthenticate"), "{out}");
        assert!(out.contains("request body: (redacted)"), "{out}");
        assert!(logs.lines_with("hunter2").is_empty(), "credentials leaked");
        assert!(!versions.is_dirty() && !sasl.is_dirty());
    }

    #[test]
    fn config_changes_are_not_printed() {
        use sluice_codec::kafka_protocol::messages::IncrementalAlterConfigsRequest;
        use sluice_codec::kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        let ctx = context("127.0.0.1:9192".parse().unwrap());
        let mut printer = DebugPrinterBuilder::new().build(&ctx);
        let config = AlterableConfig::default()
            .with_name(StrBytes::from_static_str("sasl.jaas.config"))
            .with_value(Some(StrBytes::from_static_str(
                "password=\"hunter3-secret\"",
            )));
        let body = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default().with_configs(vec![config]),
        ]);
        let mut alter = request(
            ApiKey::IncrementalAlterConfigs,
            1,
            7319,
            RequestKind::IncrementalAlterConfigs(body),
        );
        let logs = Logs::global();
        printer.on_request(&mut alter, &ctx).unwrap();
        let out = logs.lines_with("correlation_id=7319").join("\n");
        assert!(out.contains("request body: (redacted)"), "{out}");
        assert!(
            logs.lines_with("hunter3").is_empty(),
            "a config password leaked"
        );
    }
}
