//! The elements of a chain, and the rule that exactly one sink ends it.
//!
//! [`TransformConfig`] deserializes by hand to accept every form shotover
//! accepts: a transform without settings may be written `- DebugPrinter`,
//! `- DebugPrinter: {}` or `- DebugPrinter: null`. Its JSON schema (for the
//! configuration reference's test) is written by hand to match.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

use super::sinks::{KafkaSinkClusterConfig, KafkaSinkSingleConfig};
use crate::FieldError;
use crate::validate::Checks;

/// Each element is valid and exactly one sink ends the chain.
pub(crate) fn check_chain(chain: &[TransformConfig], checks: Checks) -> Result<(), FieldError> {
    let Some(last) = chain.last() else {
        return Err(FieldError::new(
            "",
            "must not be empty: it must end in a sink (KafkaSinkSingle or KafkaSinkCluster)",
        ));
    };
    for (i, t) in chain.iter().enumerate() {
        let at = format!("[{i}]");
        if t.is_sink() && i + 1 != chain.len() {
            return Err(FieldError::new(
                at,
                format!(
                    "{} is a sink and must be the last element of the chain",
                    t.kind()
                ),
            ));
        }
        t.check(checks).map_err(|e| e.within(&at))?;
    }
    if !last.is_sink() {
        return Err(FieldError::new(
            format!("[{}]", chain.len() - 1),
            format!(
                "the chain must end in a sink (KafkaSinkSingle or KafkaSinkCluster), not {}",
                last.kind()
            ),
        ));
    }
    Ok(())
}

/// One element of a chain.
#[derive(Debug, Clone)]
pub enum TransformConfig {
    /// Logs each request and response at debug level.
    DebugPrinter,
    /// One broker.
    KafkaSinkSingle(KafkaSinkSingleConfig),
    /// A whole cluster, hidden behind the Sluice nodes.
    KafkaSinkCluster(KafkaSinkClusterConfig),
}

impl TransformConfig {
    /// The element's name as written in the file, e.g. `KafkaSinkSingle`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::DebugPrinter => "DebugPrinter",
            Self::KafkaSinkSingle(_) => "KafkaSinkSingle",
            Self::KafkaSinkCluster(_) => "KafkaSinkCluster",
        }
    }

    /// True for sinks, which must end a chain.
    pub(crate) fn is_sink(&self) -> bool {
        matches!(self, Self::KafkaSinkSingle(_) | Self::KafkaSinkCluster(_))
    }

    pub(crate) fn check(&self, checks: Checks) -> Result<(), FieldError> {
        match self {
            Self::DebugPrinter => Ok(()),
            Self::KafkaSinkSingle(c) => c.check(checks).map_err(|e| e.within(self.kind())),
            Self::KafkaSinkCluster(c) => c.check(checks).map_err(|e| e.within(self.kind())),
        }
    }
}

/// The forms [`TransformConfig`]'s deserializer accepts: `DebugPrinter`
/// alone, or a single-key map from the transform's name to its settings.
impl JsonSchema for TransformConfig {
    fn schema_name() -> Cow<'static, str> {
        "TransformConfig".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let variant = |name: &str, settings: Schema| {
            json_schema!({
                "type": "object",
                "properties": { name: settings },
                "required": [name],
                "additionalProperties": false,
            })
        };
        let no_settings = json_schema!({
            "type": ["object", "null"],
            "additionalProperties": false,
            "maxProperties": 0,
        });
        json_schema!({
            "description": "One element of a chain: a transform, or the sink that ends it.",
            "oneOf": [
                { "const": "DebugPrinter" },
                variant("DebugPrinter", no_settings),
                variant(
                    "KafkaSinkSingle",
                    generator.subschema_for::<KafkaSinkSingleConfig>(),
                ),
                variant(
                    "KafkaSinkCluster",
                    generator.subschema_for::<KafkaSinkClusterConfig>(),
                ),
            ],
        })
    }
}

/// The refusal of a transform Sluice does not implement. A shotover-proxy
/// file may name any of shotover's transforms; Sluice implements the three
/// that concern Kafka and says so, rather than serde's bare "unknown
/// variant".
fn unknown_transform<E: de::Error>(name: &str) -> E {
    E::custom(format!(
        "unknown transform `{name}`: Sluice implements DebugPrinter, KafkaSinkSingle and \
         KafkaSinkCluster; shotover-proxy's other transforms (QueryCounter, Tee, \
         RequestThrottling, ...) are not implemented (docs/configuration.md, \
         \"shotover-proxy's transforms\")"
    ))
}

impl<'de> Deserialize<'de> for TransformConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TransformVisitor)
    }
}

struct TransformVisitor;

impl<'de> Visitor<'de> for TransformVisitor {
    type Value = TransformConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a transform: `DebugPrinter`, `KafkaSinkSingle: {...}` or `KafkaSinkCluster: {...}`",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v {
            "DebugPrinter" => Ok(TransformConfig::DebugPrinter),
            "KafkaSinkSingle" | "KafkaSinkCluster" => Err(E::custom(format!(
                "{v} needs settings: write `{v}:` followed by its fields"
            ))),
            other => Err(unknown_transform(other)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(name) = map.next_key::<String>()? else {
            return Err(de::Error::invalid_length(
                0,
                &"one key: the transform's name",
            ));
        };
        let transform = match name.as_str() {
            "DebugPrinter" => {
                map.next_value::<NoSettings>()?;
                TransformConfig::DebugPrinter
            }
            "KafkaSinkSingle" => TransformConfig::KafkaSinkSingle(map.next_value()?),
            "KafkaSinkCluster" => TransformConfig::KafkaSinkCluster(map.next_value()?),
            other => return Err(unknown_transform(other)),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "one transform per chain element: found `{extra}` after `{name}`; \
                 start each transform with `- `"
            )));
        }
        Ok(transform)
    }
}

/// The settings of a transform that has none: nothing, `null` or `{}`.
struct NoSettings;

impl<'de> Deserialize<'de> for NoSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoSettingsVisitor)
    }
}

struct NoSettingsVisitor;

impl<'de> Visitor<'de> for NoSettingsVisitor {
    type Value = NoSettings;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no settings")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(NoSettings)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(NoSettings)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match map.next_key::<String>()? {
            None => Ok(NoSettings),
            Some(field) => Err(de::Error::unknown_field(&field, &[])),
        }
    }
}
