//! From configuration to running listeners.
//!
//! [`Loaded::load`] reads and validates both files, including what only this
//! build can judge (the log filter syntax, which sinks are compiled in), so
//! that `validate-config` and startup refuse exactly the same files. Then
//! [`build_chains`] turns each source's chain into a `ChainBuilder`, and
//! [`bind_all`] binds every listener; nothing is bound until every chain
//! has been built.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use sluice_chain::ChainBuilder;
use sluice_chain::debug_printer::DebugPrinterBuilder;
use sluice_chain::{SinkBuilder, TransformBuilder};
use sluice_config::{
    Config, ConfigError, FieldError, KafkaSourceConfig, SourceConfig, Topology, TransformConfig,
};
use sluice_sink_cluster::{KafkaSinkClusterBuilder, Leave};
use sluice_sink_single::KafkaSinkSingleBuilder;
use sluice_source::{KafkaSource, SourceOptions};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::logging;

/// Both files, loaded and validated.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The topology file's path, for error messages.
    pub topology_path: PathBuf,
    /// The topology.
    pub topology: Topology,
    /// The config file's path, for error messages.
    pub config_path: PathBuf,
    /// The config.
    pub config: Config,
    /// The `--local-shotover-broker-id` flag, which replaced the topology's
    /// `local_shotover_broker_id` (a reload applies it again).
    pub local_broker_id: Option<i32>,
}

impl Loaded {
    /// Reads and validates both files; `local_broker_id` (the
    /// `--local-shotover-broker-id` flag) replaces the topology's
    /// `local_shotover_broker_id`.
    pub(crate) fn load(
        topology_path: &Path,
        config_path: &Path,
        local_broker_id: Option<i32>,
    ) -> Result<Self, ConfigError> {
        let config = load_config(config_path)?;
        let mut topology = Topology::load(topology_path)?;
        if let Some(id) = local_broker_id {
            topology.set_local_shotover_broker_id(id, topology_path)?;
        }
        Ok(Self {
            topology_path: topology_path.to_path_buf(),
            topology,
            config_path: config_path.to_path_buf(),
            config,
            local_broker_id,
        })
    }

    /// The Kafka sources, in file order.
    pub(crate) fn sources(&self) -> impl Iterator<Item = &KafkaSourceConfig> {
        self.topology.sources.iter().map(|s| match s {
            SourceConfig::Kafka(k) => k,
        })
    }
}

/// Reads and validates the config file: at startup, and again on SIGHUP
/// (see [`crate::hangup`]), so that both refuse the same files.
pub(crate) fn load_config(path: &Path) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    logging::parse_filter(&config.main_log_level)
        .map_err(|e| FieldError::new("main_log_level", e).in_file(path))?;
    Ok(config)
}

/// What `validate-config` checks beyond [`Loaded::load`]: every chain builds
/// and every listener's TLS files hold usable certificates and keys. Binds
/// nothing.
pub(crate) fn preflight(loaded: &Loaded) -> anyhow::Result<()> {
    build_chains(loaded)?;
    for (i, source) in loaded.sources().enumerate() {
        if let Some(tls) = &source.tls {
            sluice_tls::acceptor::acceptor(tls).with_context(|| {
                format!(
                    "{}: field `sources[{i}].Kafka.tls`",
                    loaded.topology_path.display()
                )
            })?;
        }
    }
    Ok(())
}

/// One source's settings and its chain, ready to bind.
pub(crate) struct Wired<'a> {
    /// The source's settings.
    pub source: &'a KafkaSourceConfig,
    /// Its chain, shared by all its client connections.
    pub chain: Arc<ChainBuilder>,
    /// Its cluster sink's leave handle (see [`crate::stopping`]), when the
    /// sink is a KafkaSinkCluster.
    pub leave: Option<Leave>,
}

/// Builds every source's chain (loads TLS files for the sinks).
pub(crate) fn build_chains(loaded: &Loaded) -> anyhow::Result<Vec<Wired<'_>>> {
    loaded
        .sources()
        .enumerate()
        .map(|(i, source)| {
            let (chain, leave) = build_chain(source).with_context(|| {
                format!(
                    "{}: field `sources[{i}].Kafka.chain`",
                    loaded.topology_path.display()
                )
            })?;
            Ok(Wired {
                source,
                chain: Arc::new(chain),
                leave,
            })
        })
        .collect()
}

/// One source's chain: transforms in order, then the sink; and the cluster
/// sink's leave handle.
fn build_chain(source: &KafkaSourceConfig) -> anyhow::Result<(ChainBuilder, Option<Leave>)> {
    let mut transforms: Vec<Box<dyn TransformBuilder>> = Vec::new();
    let mut sink: Option<Box<dyn SinkBuilder>> = None;
    let mut leave = None;
    for (j, t) in source.chain.iter().enumerate() {
        match t {
            TransformConfig::DebugPrinter => transforms.push(Box::new(DebugPrinterBuilder::new())),
            TransformConfig::KafkaSinkSingle(cfg) => {
                let builder = KafkaSinkSingleBuilder::new(cfg, &source.listen_addr)
                    .with_context(|| format!("[{j}]"))?;
                sink = Some(Box::new(builder));
            }
            TransformConfig::KafkaSinkCluster(cfg) => {
                let builder =
                    KafkaSinkClusterBuilder::new(cfg).with_context(|| format!("[{j}]"))?;
                leave = Some(builder.leave_handle());
                sink = Some(Box::new(builder));
            }
        }
    }
    // Validation guarantees a sink at the end; this only guards the invariant.
    let sink = sink.context("the chain has no sink")?;
    Ok((ChainBuilder::new(transforms, sink), leave))
}

/// Binds every source, returning each with its name. Stops at the first failure; listeners already bound
/// are closed when the returned error drops them.
pub(crate) async fn bind_all(
    wired: Vec<Wired<'_>>,
    opts: &SourceOptions,
    shutdown: &CancellationToken,
) -> anyhow::Result<Vec<(String, KafkaSource)>> {
    let mut bound = Vec::with_capacity(wired.len());
    for w in wired {
        let source = KafkaSource::bind(w.source, w.chain, opts.clone(), shutdown.clone()).await?;
        info!(source = %w.source.name, addr = %source.local_addr(), "listening");
        bound.push((w.source.name.clone(), source));
    }
    Ok(bound)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const CLUSTER: &str = r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - KafkaSinkCluster:
            shotover_nodes:
              - address_for_clients: "127.0.0.1:9192"
                address_for_peers: "127.0.0.1:9192"
                rack: "rack0"
                broker_id: 0
            local_shotover_broker_id: 0
            first_contact_points: ["127.0.0.1:29092"]
            connect_timeout_ms: 3000
"#;

    #[test]
    fn builds_cluster_sink_outside_a_runtime() {
        // validate-config builds chains without a runtime: the peer checks
        // must wait for one instead of panicking.
        let t = Topology::parse(CLUSTER, Path::new("t.yaml")).unwrap();
        let SourceConfig::Kafka(k) = &t.sources[0];
        build_chain(k).unwrap();
    }

    #[test]
    fn cluster_sink_with_a_bad_contact_point_fails_to_build() {
        // The config layer refuses it, naming the file and the field.
        let yaml = CLUSTER.replace("127.0.0.1:29092", "no-port");
        let e = Topology::parse(&yaml, Path::new("t.yaml")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("t.yaml"), "{text}");
        assert!(text.contains("first_contact_points"), "{text}");
        // A config that skipped validation is still refused by the builder,
        // which names the address it could not read.
        let mut t = Topology::parse(CLUSTER, Path::new("t.yaml")).unwrap();
        let SourceConfig::Kafka(k) = &mut t.sources[0];
        let Some(TransformConfig::KafkaSinkCluster(cfg)) = k.chain.last_mut() else {
            panic!("the chain ends in a cluster sink");
        };
        cfg.first_contact_points = vec!["no-port".into()];
        let Err(e) = build_chain(k) else {
            panic!("a contact point without a port is refused");
        };
        assert!(format!("{e:#}").contains("no-port"), "{e:#}");
    }

    #[test]
    fn builds_debug_printer_and_single_sink() {
        let yaml = r#"
sources:
  - Kafka:
      name: "kafka"
      listen_addr: "127.0.0.1:9192"
      chain:
        - DebugPrinter
        - KafkaSinkSingle:
            destination_port: 19092
            connect_timeout_ms: 3000
"#;
        let t = Topology::parse(yaml, Path::new("t.yaml")).unwrap();
        let SourceConfig::Kafka(k) = &t.sources[0];
        build_chain(k).unwrap();
    }
}
