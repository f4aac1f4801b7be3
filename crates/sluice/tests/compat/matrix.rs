//! The client compatibility matrix's machinery, shared by its two test
//! binaries: `it` runs it on the suite's brokers (`it/compat.rs`), `compat`
//! on the older releases (`compat.rs`). [`matrix`] runs six Kafka client
//! libraries, each running the programs under `compat/` through two Sluice
//! nodes (KafkaSinkCluster) in front of a 3-broker cluster, once with
//! PLAINTEXT and once with SCRAM-SHA-256 over SCRAM-over-mTLS (clients log
//! in with SCRAM on SASL_PLAINTEXT; Sluice checks the login against a
//! broker and opens every broker connection with the user's delegation
//! token, which it creates over the brokers' mTLS listener). The clients are
//! the same for every broker version (Java kafka-clients: the jars of the
//! suite's Kafka version).
//!
//! Scenarios (see `compat/README.md`): produce and consume; a consumer group
//! that commits, stops, and resumes from its committed offsets; admin create,
//! describe and delete of a topic; a transaction (one committed, one
//! aborted, one committed, read back `read_committed`); a share group
//! (KIP-932: a share consumer acquires and acknowledges every record), for
//! the clients that have a share consumer (Java) and the brokers that offer
//! share groups, SKIP otherwise.
//!
//! Each client is installed from its lock file (`npm ci`, `go build
//! -mod=readonly`, `pip install -r`), cached under `SLUICE_CACHE`
//! (`~/.cache/sluice`); a missing cache is rebuilt, every installation step
//! is bounded in time and fails with the command and its output. The test
//! prints the matrix as a markdown table (README's "Client compatibility"
//! section shows one run) and fails if any cell fails, except for the cells
//! listed in [`KNOWN_FAILURES`], which are shown as known failures (and fail
//! the test if they pass, so that the list stays true).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sluice_testkit::clients::{self, ClientOutput};
use sluice_testkit::cluster::{self as kafka_cluster, Cluster};
use sluice_testkit::fronted::{self, contact_points, sink_topology};
use sluice_testkit::sluice::SluiceProcess;
use sluice_testkit::{repo_root, unique, wait};

/// The scenarios every client program reports on, in table order.
const SCENARIOS: [(&str, &str); 5] = [
    ("produce-consume", "produce + consume"),
    ("group-resume", "group commit + resume"),
    ("admin", "admin create/describe/delete"),
    ("transaction", "transaction"),
    ("share-group", "share group (KIP-932)"),
];

/// Scenarios a client program may leave out (its library has no such
/// client): shown as SKIP with this reason instead of failing.
const OPTIONAL_SCENARIOS: [(&str, &str); 1] = [("share-group", "no share consumer")];

/// Cells that fail because of Sluice, as (client, security, scenario, why):
/// shown in the table as known failures instead of failing the test.
/// Empty: every cell passed when the matrix was last run.
const KNOWN_FAILURES: &[(&str, &str, &str, &str)] = &[];

/// The SCRAM user the clients log in as (a super user of the test
/// clusters: it may create topics and use transactions).
const SCRAM_USER: &str = "admin";
const SCRAM_PASSWORD: &str = "admin-secret";

/// How long one client program may run (its scenarios bound their own waits
/// well below this).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

/// How many client programs run at once (the machine has 2 cores, shared
/// with the brokers and Sluice).
const PARALLEL: usize = 3;

/// The two security settings of the matrix.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Security {
    Plaintext,
    Scram,
}

impl Security {
    fn label(self) -> &'static str {
        match self {
            Security::Plaintext => "PLAINTEXT",
            Security::Scram => "SCRAM-SHA-256 (SCRAM over mTLS)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Security::Plaintext => "PLAINTEXT",
            Security::Scram => "SCRAM",
        }
    }
}

/// One client library, ready to run: its name and how to start its program.
struct Client {
    name: &'static str,
    /// A short name for topic, group and transactional-id prefixes.
    slug: &'static str,
    command: Box<dyn Fn() -> Command + Send + Sync>,
}

fn sluice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

fn compat_dir(client: &str) -> PathBuf {
    repo_root().join("compat").join(client)
}

/// The cache directory (`SLUICE_CACHE`, default `~/.cache/sluice`).
fn cache_dir() -> PathBuf {
    std::env::var_os("SLUICE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME is set");
            PathBuf::from(home).join(".cache/sluice")
        })
}

/// Runs an installation step, bounded by `timeout`; panics with the command
/// and its output unless it succeeded.
fn install_step(command: Command, timeout: Duration, what: &str) {
    let shown = format!("{command:?}");
    let out = clients::run(command, None, timeout, what);
    assert_eq!(
        out.code,
        Some(0),
        "installing the compatibility clients: {what} failed ({shown})\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.stdout,
        out.stderr
    );
}

/// Whether `marker` in `dir` holds `want` (the lock file an install was made from).
fn installed(dir: &Path, want: &str) -> bool {
    std::fs::read_to_string(dir.join(".installed-from")).is_ok_and(|have| have == want)
}

fn mark_installed(dir: &Path, from: &str) {
    std::fs::write(dir.join(".installed-from"), from).expect("write install marker");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The jars of the suite's Kafka version (`scripts/kafka/fetch.sh`, which
/// reads `SLUICE_KAFKA_VERSION`; cached, so quick once fetched).
fn suite_jars() -> PathBuf {
    let out = clients::run(
        Command::new(repo_root().join("scripts/kafka/fetch.sh")),
        None,
        Duration::from_secs(900),
        "scripts/kafka/fetch.sh",
    );
    out.assert_success("scripts/kafka/fetch.sh (the Java client's jars)");
    PathBuf::from(out.stdout.lines().last().unwrap_or_default().trim())
}

/// Java kafka-clients: the jars of the suite's Kafka version, and the
/// single-file program `compat/java/Compat.java`, compiled by the JDK at start.
fn java() -> Client {
    let libs = suite_jars();
    let log_args = kafka_cluster::java_log_args(&libs);
    Client {
        name: "Java kafka-clients",
        slug: "java",
        command: Box::new(move || {
            let mut c = Command::new("java");
            c.args([
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
            ])
            .arg(format!("{}/*", libs.display()))
            .args(&log_args)
            .arg(compat_dir("java").join("Compat.java"));
            c
        }),
    }
}

/// librdkafka through Python `confluent-kafka`: the interpreter of
/// `scripts/lib/python-env.sh` (`SLUICE_PYTHON` when the test command set it).
fn confluent_kafka() -> Client {
    let python = match std::env::var_os("SLUICE_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let out = clients::run(
                Command::new(repo_root().join("scripts/lib/python-env.sh")),
                None,
                Duration::from_secs(300),
                "scripts/lib/python-env.sh",
            );
            out.assert_success("scripts/lib/python-env.sh (the confluent-kafka venv)");
            PathBuf::from(out.stdout.lines().last().unwrap_or_default().trim())
        }
    };
    Client {
        name: "confluent-kafka (librdkafka)",
        slug: "rdkafka",
        command: Box::new(move || {
            let mut c = Command::new(&python);
            c.arg(compat_dir("confluent-kafka").join("compat.py"));
            c
        }),
    }
}

/// kafka-python, in a venv of its own made from
/// `compat/kafka-python/requirements.txt`.
fn kafka_python() -> Client {
    let requirements = compat_dir("kafka-python").join("requirements.txt");
    let want = read(&requirements);
    let venv = cache_dir().join("venv-kafka-python");
    let python = venv.join("bin/python");
    if !(python.exists() && installed(&venv, &want)) {
        let _ = std::fs::remove_dir_all(&venv);
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        install_step(
            make,
            Duration::from_secs(120),
            "python3 -m venv (kafka-python)",
        );
        let mut pip = Command::new(&python);
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(&requirements);
        install_step(pip, Duration::from_secs(300), "pip install kafka-python");
        mark_installed(&venv, &want);
    }
    Client {
        name: "kafka-python",
        slug: "kafkapython",
        command: Box::new(move || {
            let mut c = Command::new(&python);
            c.arg(compat_dir("kafka-python").join("compat.py"));
            c
        }),
    }
}

/// kafkajs, installed with `npm ci` from `compat/kafkajs/package-lock.json`
/// into the cache; the program finds it through `NODE_PATH`.
fn kafkajs() -> Client {
    let source = compat_dir("kafkajs");
    let want = read(&source.join("package-lock.json"));
    let dir = cache_dir().join("compat/kafkajs");
    if !(dir.join("node_modules/kafkajs").exists() && installed(&dir, &want)) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the kafkajs cache directory");
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(source.join(file), dir.join(file)).expect("copy the kafkajs lock files");
        }
        let mut npm = Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(&dir);
        install_step(npm, Duration::from_secs(300), "npm ci (kafkajs)");
        mark_installed(&dir, &want);
    }
    let modules = dir.join("node_modules");
    Client {
        name: "kafkajs",
        slug: "kafkajs",
        command: Box::new(move || {
            let mut c = Command::new("node");
            c.arg(compat_dir("kafkajs").join("compat.js"))
                .env("NODE_PATH", &modules)
                .env("KAFKAJS_NO_PARTITIONER_WARNING", "1");
            c
        }),
    }
}

/// A Go program under `compat/<module>`, built with `go build -mod=readonly`
/// (modules as go.sum pins them; Go's build cache makes a rebuild quick).
fn go_client(name: &'static str, module: &'static str) -> Client {
    let binary = cache_dir().join("compat/bin").join(module);
    std::fs::create_dir_all(binary.parent().unwrap()).expect("create the Go binary directory");
    let mut build = Command::new("go");
    build
        .args(["build", "-mod=readonly", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(compat_dir(module))
        .env("GOFLAGS", "-mod=readonly");
    install_step(
        build,
        Duration::from_secs(480),
        &format!("go build ({module})"),
    );
    Client {
        name,
        slug: module,
        command: Box::new(move || Command::new(&binary)),
    }
}

/// Every client, installed once per test process (the ignored tests may
/// run at once and share it).
fn clients() -> &'static [Client] {
    static CLIENTS: OnceLock<Vec<Client>> = OnceLock::new();
    CLIENTS.get_or_init(install_clients)
}

/// Every client, installed (in parallel where independent: the two Go
/// builds share one thread, since each uses every core).
fn install_clients() -> Vec<Client> {
    let started = Instant::now();
    let clients = std::thread::scope(|s| {
        let go = s.spawn(|| {
            vec![
                go_client("franz-go", "franz-go"),
                go_client("IBM/sarama", "sarama"),
            ]
        });
        let kafkajs = s.spawn(kafkajs);
        let kafka_python = s.spawn(kafka_python);
        let confluent = s.spawn(confluent_kafka);
        let mut all = vec![java()];
        for handle in [confluent, kafka_python, kafkajs] {
            all.push(
                handle
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
        }
        all.extend(go.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        all
    });
    eprintln!("compat: clients installed in {:.0?}", started.elapsed());
    clients
}

/// The KafkaSinkCluster topology of SCRAM node `local` of `nodes`, in front
/// of `cluster`'s SASL_PLAINTEXT listeners, with SCRAM over mTLS (the
/// topology of [`sluice_testkit::scram::sasl_topology`], on two nodes).
fn scram_topology(cluster: &Cluster, nodes: &[String], local: usize) -> String {
    let settings = format!(
        "            check_shotover_peers_delay_ms: 1000\n{}",
        sluice_testkit::scram::scram_over_mtls_settings(cluster, 3600)
    );
    let racks = vec!["rack0"; nodes.len()];
    sink_topology(
        nodes,
        &racks,
        local,
        &contact_points(cluster, "SASL_PLAINTEXT"),
        60,
        &settings,
    )
}

/// Two SCRAM-over-mTLS Sluice nodes, returned once a SCRAM client of each
/// sees both (Metadata needs a login there, so librdkafka's `auth_check.py`
/// asks).
fn start_scram_nodes(cluster: &Cluster) -> (Vec<SluiceProcess>, Vec<String>) {
    let nodes = fronted::listen_addrs(2);
    let processes = (0..nodes.len())
        .map(|i| {
            SluiceProcess::start(
                sluice_bin(),
                &scram_topology(cluster, &nodes, i),
                &[&nodes[i]],
            )
        })
        .collect();
    let mut expected = nodes.clone();
    expected.sort();
    let sasl = clients::sasl_settings("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD);
    for node in &nodes {
        wait::until(
            Duration::from_secs(60),
            &format!("SCRAM Sluice node {node} to show both nodes"),
            || {
                let mut args = vec!["--bootstrap", node.as_str()];
                args.extend(sasl.iter().map(String::as_str));
                let out = clients::run_librdkafka("auth_check.py", &args, Duration::from_secs(60));
                let line = out.stdout.lines().last().unwrap_or_default();
                let json: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| format!("{e}: {}", out.text()))?;
                let mut shown: Vec<String> = json["brokers"]
                    .as_array()
                    .map(|b| {
                        b.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                shown.sort();
                if shown == expected {
                    Ok(())
                } else {
                    Err(line.to_owned())
                }
            },
        );
    }
    (processes, nodes)
}

/// What one client program reported for one security setting.
struct Run {
    client: &'static str,
    security: Security,
    version: String,
    /// scenario -> (PASS|FAIL|SKIP, detail)
    results: BTreeMap<String, (String, String)>,
    output: String,
    elapsed: Duration,
}

fn run_client(client: &Client, security: Security, bootstrap: &str) -> Run {
    let prefix = unique(&format!(
        "compat-{}-{}",
        client.slug,
        security.key().to_lowercase()
    ));
    let mut command = (client.command)();
    command.args(["--bootstrap", bootstrap, "--prefix", &prefix]);
    if security == Security::Scram {
        command.args([
            "--scram-user",
            SCRAM_USER,
            "--scram-password",
            SCRAM_PASSWORD,
        ]);
    }
    let what = format!("{} ({})", client.name, security.key());
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        clients::run(command, None, CLIENT_TIMEOUT, &what)
    }));
    let elapsed = started.elapsed();
    let out = match outcome {
        Ok(out) => out,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the client run panicked".to_owned());
            ClientOutput {
                code: None,
                stdout: String::new(),
                stderr: message,
            }
        }
    };
    let mut version = String::new();
    let mut results = BTreeMap::new();
    for line in out.stdout.lines() {
        if let Some(v) = line.strip_prefix("VERSION ") {
            version = v.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("RESULT ") {
            let mut parts = rest.splitn(3, ' ');
            let (Some(scenario), Some(status)) = (parts.next(), parts.next()) else {
                continue;
            };
            let detail = parts.next().unwrap_or_default().to_owned();
            results.insert(scenario.to_owned(), (status.to_owned(), detail));
        }
    }
    for (scenario, why) in OPTIONAL_SCENARIOS {
        if out.code.is_some() && !results.contains_key(scenario) {
            results.insert(scenario.to_owned(), ("SKIP".to_owned(), why.to_owned()));
        }
    }
    for (scenario, _) in SCENARIOS {
        results.entry(scenario.to_owned()).or_insert_with(|| {
            (
                "FAIL".to_owned(),
                format!(
                    "no result (exit code {:?}{})",
                    out.code,
                    if out.code.is_none() {
                        ", killed or timed out"
                    } else {
                        ""
                    }
                ),
            )
        });
    }
    Run {
        client: client.name,
        security,
        version,
        results,
        output: format!(
            "exit code {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.code, out.stdout, out.stderr
        ),
        elapsed,
    }
}

fn known_failure(client: &str, security: Security, scenario: &str) -> Option<&'static str> {
    KNOWN_FAILURES
        .iter()
        .find(|(c, s, sc, _)| *c == client && *s == security.key() && *sc == scenario)
        .map(|(_, _, _, why)| *why)
}

/// The WARN and ERROR lines of a Sluice node's log (the first 40).
fn log_problems(sluice: &SluiceProcess) -> String {
    sluice
        .log()
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .take(40)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs every client with both security settings through two Sluice nodes
/// in front of cluster `name`, prints the table and fails on any cell that
/// is not as expected.
pub(crate) fn matrix(name: &str) {
    let started = Instant::now();
    let cluster = Cluster::get(name);
    let broker = cluster.kafka_version().to_owned();
    // Install the clients while the Sluice nodes start.
    let (clients, (plain, plain_nodes), (scram, scram_nodes)) = std::thread::scope(|s| {
        let plain = s.spawn(|| fronted::start_nodes(sluice_bin(), &cluster, 2));
        let scram = s.spawn(|| start_scram_nodes(&cluster));
        let clients = clients();
        (
            clients,
            plain
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            scram
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e)),
        )
    });
    eprintln!("compat: ready after {:.0?}", started.elapsed());

    // Each client connects to one node and sees both (the bootstrap list
    // names one; the other comes from Metadata). Alternate which one.
    let mut jobs = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        jobs.push((client, Security::Plaintext, plain_nodes[i % 2].clone()));
        jobs.push((client, Security::Scram, scram_nodes[(i + 1) % 2].clone()));
    }
    let queue = Mutex::new(jobs.into_iter());
    let runs = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                loop {
                    let Some((client, security, bootstrap)) = queue.lock().unwrap().next() else {
                        break;
                    };
                    let run = run_client(client, security, &bootstrap);
                    eprintln!(
                        "compat: {} {} done in {:.0?}",
                        run.client,
                        run.security.key(),
                        run.elapsed
                    );
                    runs.lock().unwrap().push(run);
                }
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    let order: Vec<&str> = clients.iter().map(|c| c.name).collect();
    runs.sort_by_key(|r| (order.iter().position(|n| *n == r.client), r.security));

    // The table, and every cell that is not as expected.
    let mut table = String::from("| client | version | broker | security |");
    for (_, title) in SCENARIOS {
        table.push_str(&format!(" {title} |"));
    }
    table.push_str("\n|---|---|---|---|");
    table.push_str(&"---|".repeat(SCENARIOS.len()));
    table.push('\n');
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    for run in &runs {
        table.push_str(&format!(
            "| {} | {} | Kafka {broker} | {} |",
            run.client,
            run.version,
            run.security.label()
        ));
        let mut failed = false;
        for (scenario, _) in SCENARIOS {
            let (status, detail) = &run.results[scenario];
            let known = known_failure(run.client, run.security, scenario);
            let cell = match (status.as_str(), known) {
                ("PASS", None) => "PASS".to_owned(),
                ("SKIP", None) => format!("SKIP ({detail})"),
                ("PASS", Some(why)) => {
                    failed = true;
                    failures.push(format!(
                        "{} / {} / {scenario}: listed as a known failure ({why}) but passed: remove it from KNOWN_FAILURES",
                        run.client,
                        run.security.key()
                    ));
                    "PASS (listed as known failure)".to_owned()
                }
                (_, Some(why)) => {
                    notes.push(format!(
                        "{} / {} / {scenario}: known failure: {why}; this run: {detail}",
                        run.client,
                        run.security.key()
                    ));
                    "known failure".to_owned()
                }
                (_, None) => {
                    failed = true;
                    failures.push(format!(
                        "{} / {} / {scenario}: {status} {detail}",
                        run.client,
                        run.security.key()
                    ));
                    "**FAIL**".to_owned()
                }
            };
            table.push_str(&format!(" {cell} |"));
        }
        table.push('\n');
        if failed {
            eprintln!(
                "==== {} ({}) output ====\n{}\n==== end ====",
                run.client,
                run.security.key(),
                run.output
            );
        }
    }
    println!(
        "\nClient compatibility matrix, Kafka {broker} brokers ({:.0?}):\n\n{table}",
        started.elapsed()
    );
    for note in &notes {
        println!("{note}");
    }
    if !failures.is_empty() {
        let logs = sluice_testkit::state_dir().join("logs");
        std::fs::create_dir_all(&logs).expect("create the logs directory");
        for (name, nodes) in [("PLAINTEXT", &plain), ("SCRAM", &scram)] {
            for (i, node) in nodes.iter().enumerate() {
                // The whole log, kept for a look at what the failed cell did.
                let kept = logs.join(format!(
                    "{}-compat-kafka-{broker}-{}-node{i}.log",
                    unique("sluice"),
                    name.to_lowercase()
                ));
                std::fs::write(&kept, node.log()).expect("keep the Sluice log");
                eprintln!(
                    "==== Sluice {name} node {i}: WARN/ERROR lines (whole log: {}) ====\n{}",
                    kept.display(),
                    log_problems(node)
                );
            }
        }
        panic!(
            "{} cell(s) failed:\n{}\n\n{table}",
            failures.len(),
            failures.join("\n")
        );
    }
}
