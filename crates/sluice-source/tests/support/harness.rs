//! Starting and stopping a source in tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sluice_chain::ChainBuilder;
use sluice_config::KafkaSourceConfig;
use sluice_source::{KafkaSource, SourceError, SourceOptions};
use sluice_tls::reload::Reload;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::sink::{Probe, TestSinkBuilder};

/// The bound on every wait in these tests.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// A source config on an ephemeral loopback port, everything else default.
/// Each gets its own name, so that its `source`-labelled metrics are its own.
pub(crate) fn source_config() -> KafkaSourceConfig {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    KafkaSourceConfig {
        name: format!("test-{}", NEXT.fetch_add(1, Ordering::Relaxed)),
        listen_addr: "127.0.0.1:0".to_owned(),
        connection_limit: None,
        hard_connection_limit: None,
        tls: None,
        idle_timeout_secs: None,
        max_frame_bytes: None,
        write_timeout_secs: None,
        max_unauthenticated_frame_bytes: None,
        authentication_timeout_secs: None,
        unauthenticated_connection_limit: None,
        unauthenticated_connection_limit_per_address: None,
        connection_memory_budget_bytes: None,
        chain: Vec::new(),
    }
}

/// A running source.
pub(crate) struct Running {
    pub name: String,
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub probe: Arc<Probe>,
    /// The listener's TLS, when it has some.
    pub tls_reload: Option<Arc<dyn Reload>>,
    /// Its connection tasks.
    pub connections: sluice_source::Connections,
    handle: JoinHandle<Result<(), SourceError>>,
}

/// Binds and runs a source whose sink is a [`TestSinkBuilder`].
pub(crate) async fn start(cfg: KafkaSourceConfig, gate: Option<Arc<Semaphore>>) -> Running {
    start_with(cfg, gate, SourceOptions::default()).await
}

pub(crate) async fn start_with(
    cfg: KafkaSourceConfig,
    gate: Option<Arc<Semaphore>>,
    opts: SourceOptions,
) -> Running {
    start_sink(cfg, TestSinkBuilder::new(gate), opts).await
}

/// Binds and runs a source whose sink authenticates clients (see
/// [`TestSinkBuilder::authenticates`]).
pub(crate) async fn start_authenticating(cfg: KafkaSourceConfig) -> Running {
    let mut sink = TestSinkBuilder::new(None);
    sink.authenticates = true;
    start_sink(cfg, sink, SourceOptions::default()).await
}

async fn start_sink(cfg: KafkaSourceConfig, sink: TestSinkBuilder, opts: SourceOptions) -> Running {
    super::metrics::install();
    // Logs show in the output of a failing test (RUST_LOG=debug for more).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "sluice_source=info".into()),
        )
        .with_test_writer()
        .try_init();
    let probe = Arc::clone(&sink.probe);
    let chain = Arc::new(ChainBuilder::new(Vec::new(), Box::new(sink)));
    let shutdown = CancellationToken::new();
    let source = KafkaSource::bind(&cfg, chain, opts, shutdown.clone())
        .await
        .expect("bind");
    let addr = source.local_addr();
    let tls_reload = source.tls_reload();
    let connections = source.connections();
    let handle = tokio::spawn(source.run());
    Running {
        name: cfg.name.clone(),
        addr,
        shutdown,
        probe,
        tls_reload,
        connections,
        handle,
    }
}

impl Running {
    /// Cancels the token and waits for `run()` to return.
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        self.join().await;
    }

    /// Waits for `run()` to return (after the token was cancelled).
    pub(crate) async fn join(self) {
        tokio::time::timeout(WAIT, self.handle)
            .await
            .expect("run() did not return after shutdown")
            .expect("run() panicked")
            .expect("run() failed");
    }
}
