//! Tests that `docs/configuration.md` documents exactly the fields the
//! configuration types accept, so that the reference cannot rot.
//!
//! The types derive `schemars::JsonSchema` (which reads their serde
//! attributes: renames, defaults, `deny_unknown_fields`, `try_from`); the
//! test walks the JSON schema of each file and lists every field with its
//! nesting path (`topology.sources[].Kafka.listen_addr`). The page documents
//! fields in tables under headings that name their path in a code span; a
//! table row's first cell is the field. Both lists must match, and for each
//! field the type column's first word, whether the default column says
//! `required`, and the default value (`x-default` in the schema) must agree.
//! Every `yaml` block on the page must load and validate as the file its
//! first line names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::validate::Checks;
use crate::{Config, Topology};

/// A field as the schema describes it.
#[derive(Debug)]
struct SchemaField {
    /// `integer`, `string`, `boolean`, `list` or `object`.
    kind: String,
    required: bool,
    default: Option<Value>,
}

/// A field as the page documents it.
#[derive(Debug)]
struct DocField {
    type_cell: String,
    default_cell: String,
    line: usize,
}

fn page_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
}

fn page() -> String {
    std::fs::read_to_string(page_path()).expect("read docs/configuration.md")
}

/// Every field of both files, by path.
fn schema_fields() -> BTreeMap<String, SchemaField> {
    let mut out = BTreeMap::new();
    for (root, schema) in [
        ("topology", schemars::schema_for!(Topology)),
        ("config", schemars::schema_for!(Config)),
    ] {
        let value = schema.as_value();
        let defs = value.get("$defs").cloned().unwrap_or(Value::Null);
        walk(&defs, root, value, false, &mut out);
    }
    out
}

/// The schema itself, or the definition it refers to.
fn resolve<'a>(defs: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap_or(r);
            defs.get(name)
                .unwrap_or_else(|| panic!("schema refers to unknown definition {r}"))
        }
        None => schema,
    }
}

/// Records the fields under `path`. `choice`: `schema` is one of several
/// alternatives (a chain element's transforms), so none of its keys is
/// required on its own.
fn walk(
    defs: &Value,
    path: &str,
    schema: &Value,
    choice: bool,
    out: &mut BTreeMap<String, SchemaField>,
) {
    let schema = resolve(defs, schema);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, prop) in props {
            let full = format!("{path}.{name}");
            let default = prop
                .get("x-default")
                .or_else(|| prop.get("default"))
                .filter(|d| !d.is_null())
                .cloned();
            let field = SchemaField {
                kind: kind(defs, prop),
                required: !choice && required.contains(&name.as_str()),
                default,
            };
            out.insert(full.clone(), field);
            walk(defs, &full, prop, false, out);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(defs, &format!("{path}[]"), items, false, out);
    }
    for key in ["oneOf", "anyOf"] {
        let alternatives = schema.get(key).and_then(Value::as_array);
        let alternatives = alternatives.map(Vec::as_slice).unwrap_or_default();
        // `Option<T>` is `anyOf: [T, null]`: a choice only between values.
        let null = Value::from("null");
        let values = alternatives.iter().filter(|a| a.get("type") != Some(&null));
        let choice = values.count() > 1;
        for alternative in alternatives {
            walk(defs, path, alternative, choice, out);
        }
    }
}

/// The documented kind of a field's value.
fn kind(defs: &Value, schema: &Value) -> String {
    let schema = resolve(defs, schema);
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if let Some(t) = types.into_iter().find(|t| *t != "null") {
        return if t == "array" { "list" } else { t }.to_owned();
    }
    for key in ["anyOf", "oneOf"] {
        let alternatives = schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        if let Some(k) = alternatives.map(|a| kind(defs, a)).find(|k| k != "null") {
            return k;
        }
    }
    if schema.get("properties").is_some() {
        "object".to_owned()
    } else {
        "null".to_owned()
    }
}

/// The cells of a table row, split on `|` but not on `\|`.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cells.last_mut().unwrap().push('|');
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The code spans of `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Every documented field, by path. Panics on a malformed table.
fn documented_fields(page: &str) -> BTreeMap<String, DocField> {
    let mut out = BTreeMap::new();
    let mut paths: Vec<String> = Vec::new();
    let mut columns: Option<Vec<String>> = None;
    let mut in_code = false;
    for (i, line) in page.lines().enumerate() {
        let line_no = i + 1;
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            paths = code_spans(line)
                .into_iter()
                .filter(|s| is_path(s))
                .map(str::to_owned)
                .collect();
            continue;
        }
        if !line.trim_start().starts_with('|') {
            columns = None;
            continue;
        }
        let row = cells(line);
        let Some(cols) = &columns else {
            columns = Some(row);
            continue;
        };
        if paths.is_empty() || row.iter().all(|c| c.starts_with('-')) {
            continue;
        }
        let cell = |name: &str| {
            let at = cols.iter().position(|c| c == name).unwrap_or_else(|| {
                panic!("docs/configuration.md:{line_no}: the table has no `{name}` column")
            });
            row.get(at).cloned().unwrap_or_default()
        };
        let field = cell("field");
        let name = field
            .strip_prefix('`')
            .and_then(|f| f.strip_suffix('`'))
            .filter(|f| !f.contains('`'))
            .unwrap_or_else(|| {
                panic!("docs/configuration.md:{line_no}: the field cell must be one code span")
            });
        for path in &paths {
            let doc = DocField {
                type_cell: cell("type"),
                default_cell: cell("default"),
                line: line_no,
            };
            if let Some(first) = out.insert(format!("{path}.{name}"), doc) {
                panic!(
                    "docs/configuration.md:{line_no}: {path}.{name} is also documented on line {}",
                    first.line
                );
            }
        }
    }
    out
}

fn is_path(span: &str) -> bool {
    ["topology", "config"]
        .iter()
        .any(|root| span == *root || span.starts_with(&format!("{root}.")))
}

/// Every disagreement between the schema and `page`.
fn problems(page: &str) -> Vec<String> {
    let schema = schema_fields();
    let docs = documented_fields(page);
    let mut problems = Vec::new();
    for (path, field) in &schema {
        let Some(doc) = docs.get(path) else {
            problems.push(format!("undocumented field {path} ({})", field.kind));
            continue;
        };
        let at = format!("docs/configuration.md:{}: {path}", doc.line);
        let first_word = doc.type_cell.split_whitespace().next().unwrap_or("");
        if first_word != field.kind {
            problems.push(format!(
                "{at}: type `{}` should start with `{}`",
                doc.type_cell, field.kind
            ));
        }
        let says_required = doc.default_cell == "required";
        if says_required != field.required {
            let should = if field.required { "" } else { "not " };
            problems.push(format!(
                "{at}: the default column should {should}say `required`"
            ));
        }
        if let Some(default) = &field.default
            && !doc.default_cell.contains(&default.to_string())
        {
            problems.push(format!(
                "{at}: the default column `{}` does not give the default {default}",
                doc.default_cell
            ));
        }
    }
    for (path, doc) in &docs {
        if !schema.contains_key(path) {
            problems.push(format!(
                "docs/configuration.md:{}: {path} is documented but no such field exists",
                doc.line
            ));
        }
    }
    problems
}

#[test]
fn every_field_is_documented_and_every_documented_field_exists() {
    let problems = problems(&page());
    assert!(
        problems.is_empty(),
        "docs/configuration.md disagrees with the configuration types:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_schema_walk_sees_nested_fields() {
    let fields = schema_fields();
    for path in [
        "topology.sources[].Kafka.listen_addr",
        "topology.sources[].Kafka.timeout",
        "topology.sources[].Kafka.chain[].DebugPrinter",
        "topology.sources[].Kafka.chain[].KafkaSinkCluster.shotover_nodes[].address",
        "topology.sources[].Kafka.chain[].KafkaSinkCluster.authorize_scram_over_mtls.tls.verify_hostname",
        "config.observability_interface",
    ] {
        assert!(fields.contains_key(path), "the schema walk missed {path}");
    }
    let limit = &fields["topology.sources[].Kafka.connection_limit"];
    assert_eq!(
        limit.default,
        Some(Value::from(crate::DEFAULT_CONNECTION_LIMIT))
    );
}

#[test]
fn a_renamed_or_retyped_field_is_caught() {
    let page = page();
    let renamed = page.replace("| `listen_addr` |", "| `listen_address` |");
    let text = problems_text(&renamed);
    assert!(
        text.contains("undocumented field topology.sources[].Kafka.listen_addr"),
        "{text}"
    );
    assert!(
        text.contains("topology.sources[].Kafka.listen_address is documented but"),
        "{text}"
    );

    let retyped = page.replace(
        "| `write_timeout_secs` | integer | 30 |",
        "| `write_timeout_secs` | string | 31 |",
    );
    let text = problems_text(&retyped);
    assert!(text.contains("write_timeout_secs: type `string`"), "{text}");
    assert!(text.contains("does not give the default 30"), "{text}");
}

fn problems_text(page: &str) -> String {
    problems(page).join("\n")
}

/// Every `yaml` block of the page, by the file its first line names.
#[test]
fn examples_on_the_page_load() {
    let page = page();
    let origin = page_path();
    let (mut topologies, mut configs) = (0, 0);
    let mut blocks = page.split("```yaml\n").skip(1);
    for block in blocks.by_ref() {
        let text = block.split("\n```").next().unwrap_or("");
        match text.lines().next() {
            Some("# topology.yaml") => {
                let topology: Topology = crate::load::parse_yaml(text, &origin)
                    .unwrap_or_else(|e| panic!("example topology:\n{text}\n{e}"));
                // The examples' TLS files are deployment paths.
                topology
                    .check(Checks { files: false })
                    .unwrap_or_else(|e| panic!("example topology:\n{text}\n{e}"));
                topologies += 1;
            }
            Some("# config.yaml") => {
                Config::parse(text, &origin)
                    .unwrap_or_else(|e| panic!("example config:\n{text}\n{e}"));
                configs += 1;
            }
            first => panic!(
                "a yaml block on docs/configuration.md must start with `# topology.yaml` \
                 or `# config.yaml`, not {first:?}"
            ),
        }
    }
    assert!(
        topologies >= 3 && configs >= 1,
        "{topologies} topologies, {configs} configs"
    );
}
