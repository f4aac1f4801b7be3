//! Broker configs through KafkaSinkCluster against the real 3-node cluster
//! (`trio`, PLAINTEXT: the principal is ANONYMOUS, a super user), with
//! Kafka's `kafka-configs` and raw requests pointed at one Sluice node.
//!
//! What topology hiding changes, pinned here so that a change is noticed: a
//! BROKER or BROKER_LOGGER config resource named by a Sluice id is described
//! by a real broker standing for that node (its own config values); an id
//! that is no Sluice node is refused; altering a named broker is refused with
//! a message pointing at `--entity-default`, which works (cluster defaults).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use sluice_codec::{ApiKey, ResponseKind};
use sluice_testkit::clients::{ClientOutput, tool_at, tool_ok};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::fronted;
use sluice_testkit::raw::RawClient;
use sluice_testkit::requests::{
    self, BROKER_LOGGER_RESOURCE, BROKER_RESOURCE, INVALID_REQUEST, TOPIC_RESOURCE,
};
use sluice_testkit::scram::CONFIG_COMMAND;
use sluice_testkit::{unique, wait};

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// `kafka-configs` with `args` through `listen`, its stdout and stderr.
fn configs_tool(cluster: &Cluster, listen: &str, args: &[&str]) -> ClientOutput {
    tool_at(cluster, CONFIG_COMMAND, listen, args)
}

#[test]
fn broker_configs_of_a_sluice_node() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let broker = [
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--describe",
    ];
    let all = tool_ok(
        &cluster,
        CONFIG_COMMAND,
        &listen,
        &[&broker[..], &["--all"]].concat(),
    );
    assert!(all.contains("All configs for broker 0 are:"), "{all}");
    for config in ["log.cleaner.threads=", "num.io.threads=", "node.id="] {
        assert!(all.contains(config), "{config}\n{all}");
    }
    let dynamic = tool_ok(&cluster, CONFIG_COMMAND, &listen, &broker);
    assert!(
        dynamic.contains("Dynamic configs for broker 0 are:"),
        "{dynamic}"
    );
    let loggers = tool_ok(
        &cluster,
        CONFIG_COMMAND,
        &listen,
        &[
            "--entity-type",
            "broker-loggers",
            "--entity-name",
            "0",
            "--describe",
        ],
    );
    assert!(
        loggers.contains("Dynamic configs for broker-logger 0 are:"),
        "{loggers}"
    );
    assert!(loggers.contains("kafka.log.LogCleaner=INFO"), "{loggers}");

    // Raw: an id that is no Sluice node is refused by Sluice, the rest of
    // the request is answered, in request order.
    let mut client = RawClient::connect(&listen);
    let answer = client.request(
        ApiKey::DescribeConfigs,
        requests::DESCRIBE_CONFIGS_VERSION,
        requests::describe_configs(&[
            (BROKER_RESOURCE, "7"),
            (BROKER_LOGGER_RESOURCE, "0"),
            (BROKER_RESOURCE, ""),
        ]),
    );
    assert_eq!(
        requests::config_outcomes(&answer),
        [
            (BROKER_RESOURCE, "7".to_owned(), INVALID_REQUEST),
            (BROKER_LOGGER_RESOURCE, "0".to_owned(), 0),
            (BROKER_RESOURCE, String::new(), 0),
        ],
        "{answer:?}"
    );
    let ResponseKind::DescribeConfigs(answer) = answer else {
        panic!("not a DescribeConfigs answer: {answer:?}");
    };
    let message = answer.results[0]
        .error_message
        .as_deref()
        .unwrap_or_default();
    assert!(message.contains("Unknown broker id 7"), "{message}");
    assert!(!answer.results[1].configs.is_empty(), "logger levels");
}

/// Removes the cluster-wide `log.cleaner.threads` default, directly, when
/// dropped (also when the test fails).
struct ResetCleanerThreads<'a>(&'a Cluster);

impl Drop for ResetCleanerThreads<'_> {
    fn drop(&mut self) {
        let direct = self.0.bootstrap("PLAINTEXT");
        let out = configs_tool(
            self.0,
            &direct,
            &[
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-default",
                "--delete-config",
                "log.cleaner.threads",
            ],
        );
        if out.code != Some(0) {
            eprintln!("could not reset log.cleaner.threads: {out:?}");
        }
    }
}

#[test]
fn per_broker_alters_are_refused_cluster_defaults_work() {
    let cluster = Cluster::get(TRIO);
    let (_sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let set = ["--alter", "--add-config", "log.cleaner.threads=2"];
    let refused = configs_tool(
        &cluster,
        &listen,
        &[
            &["--entity-type", "brokers", "--entity-name", "0"][..],
            &set,
        ]
        .concat(),
    );
    assert_ne!(refused.code, Some(0), "{refused:?}");
    let said = refused.text();
    assert!(
        said.contains("Per-broker configs cannot be altered through Sluice")
            && said.contains("--entity-default"),
        "{refused:?}"
    );
    let direct = cluster.bootstrap("PLAINTEXT");
    for id in ["1", "2", "3"] {
        let shown = tool_ok(
            &cluster,
            CONFIG_COMMAND,
            &direct,
            &[
                "--entity-type",
                "brokers",
                "--entity-name",
                id,
                "--describe",
            ],
        );
        assert!(
            !shown.contains("log.cleaner.threads"),
            "broker {id}: {shown}"
        );
    }

    let _reset = ResetCleanerThreads(&cluster);
    tool_ok(
        &cluster,
        CONFIG_COMMAND,
        &listen,
        &[&["--entity-type", "brokers", "--entity-default"][..], &set].concat(),
    );
    wait::until(
        Duration::from_secs(30),
        "the cluster default to be shown through Sluice",
        || {
            let shown = tool_ok(
                &cluster,
                CONFIG_COMMAND,
                &listen,
                &["--entity-type", "brokers", "--entity-default", "--describe"],
            );
            if shown.contains("log.cleaner.threads=2") {
                Ok(())
            } else {
                Err(shown)
            }
        },
    );

    // Raw, validate only: the topic resource is checked by a broker, the
    // broker resource refused by Sluice, both answered in request order.
    let topic = unique("admin-alter");
    cluster.create_topic(&topic, 1, 3);
    let mut client = RawClient::connect(&listen);
    let answer = client.request(
        ApiKey::IncrementalAlterConfigs,
        requests::INCREMENTAL_ALTER_CONFIGS_VERSION,
        requests::incremental_alter_configs(
            &[(BROKER_RESOURCE, "0"), (TOPIC_RESOURCE, &topic)],
            ("retention.ms", "3600000"),
            true,
        ),
    );
    assert!(
        matches!(answer, ResponseKind::IncrementalAlterConfigs(_)),
        "not an IncrementalAlterConfigs answer: {answer:?}"
    );
    assert_eq!(
        requests::config_outcomes(&answer),
        [
            (BROKER_RESOURCE, "0".to_owned(), INVALID_REQUEST),
            (TOPIC_RESOURCE, topic, 0)
        ],
        "{answer:?}"
    );
}
