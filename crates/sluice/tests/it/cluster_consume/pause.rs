//! **Explicit `pause()`/`resume()`.** A librdkafka consumer
//! (`pause_check.py`) and a Java one (`SeekCheck.java --mode pause`), each
//! assigned six partitions over the three brokers, pause
//! a random set of them every few hundred milliseconds, each for 0.2 to 12
//! seconds, while a trickle of records keeps parts parked (5 s max wait).
//! A paused partition drops out of the consumer's fetches: what Sluice read
//! ahead or stashed for it waits (at most 10 s), and on resume the consumer
//! asks again from where its application is. Every record must then come
//! exactly once, in order, per partition: nothing stashed for an old
//! position may answer a new one, and nothing is skipped.

use std::time::Duration;

use serde_json::Value;
use sluice_testkit::clients::{self, KEYED, java_produce, keyed_records};
use sluice_testkit::cluster::{Cluster, TRIO};
use sluice_testkit::delivery::{self, ProducerRun, ToolProcess};
use sluice_testkit::fronted::{self, create_spread_topic};
use sluice_testkit::unique;

use super::{assert_no_closed_client, java_parking, librdkafka_parking, sluice_bin};

#[test]
fn pausing_and_resuming_partitions_reads_every_record_once_in_order() {
    let cluster = Cluster::get(TRIO);
    let (sluice, listen) = fronted::start_one(sluice_bin(), &cluster);
    let topic = unique("consume-pause");
    create_spread_topic(&cluster, &topic, 6);
    java_produce(
        &cluster,
        &listen,
        &topic,
        &keyed_records("pause", 600),
        &KEYED,
    );
    let mut trickle = ProducerRun::idempotent(1_000_000, 20).start(&cluster, &listen, &topic);
    delivery::wait_acked(&mut trickle, 20, Duration::from_secs(60));
    let base = [
        "--bootstrap",
        listen.as_str(),
        "--topic",
        &topic,
        "--seconds",
        "30",
    ];
    let rdkafka_wait = librdkafka_parking();
    let mut args = base.to_vec();
    args.extend_from_slice(&["-X", &rdkafka_wait]);
    let mut librdkafka = ToolProcess::spawn(clients::librdkafka("pause_check.py", &args), "pause");
    let java_wait = java_parking();
    let mut args = base.to_vec();
    args.extend_from_slice(&[
        "--mode",
        "pause",
        "-X",
        &java_wait,
        "-X",
        "max.poll.records=50",
    ]);
    let java = clients::run(
        clients::java_program(&cluster, "SeekCheck.java", &args),
        None,
        Duration::from_secs(150),
        "SeekCheck.java --mode pause",
    );
    let librdkafka = librdkafka.wait_exit(Duration::from_secs(90));
    trickle.assert_running();
    trickle.terminate(Duration::from_secs(60));
    assert_pauses_clean("the librdkafka consumer (pause_check.py)", &librdkafka);
    assert_pauses_clean("the Java consumer (SeekCheck.java --mode pause)", &java);
    assert_no_closed_client(&sluice);
}

/// `out` (a pause checker's run) read every record once, in order, per
/// partition, and paused, resumed and read enough to mean it.
fn assert_pauses_clean(who: &str, out: &clients::ClientOutput) {
    let report: Value = out
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{who} printed no report\n{}", out.text()));
    eprintln!("{who}: {report}");
    assert!(
        out.code == Some(0) && report["error_count"].as_u64() == Some(0),
        "{who}: every record once, in order, per partition, across pauses and resumes; \
         report: {report}\n--- stderr ---\n{}",
        out.stderr
    );
    let count = |key: &str| report[key].as_u64().unwrap_or(0);
    assert!(
        count("pauses") >= 10
            && count("resumes") >= 10
            && count("after_resume") >= 5
            && count("records") >= 600,
        "{who}: paused, resumed and read enough: {report}"
    );
}
