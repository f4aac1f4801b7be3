//! A walk over a message body, run before `kafka-protocol` decodes it.
//!
//! `kafka-protocol` 0.18 decodes an array by reading its element count from the
//! wire and calling `Vec::with_capacity(count)` before it reads one element. A
//! peer that sends `7f ff ff ff` where a Metadata request's topic count belongs
//! asks for `i32::MAX * 72` bytes; the allocator fails and Rust aborts the whole
//! process (an allocation failure is not a panic and cannot be caught). Sluice
//! decodes bytes from clients and brokers, so it must never hand such a body to
//! the decoder.
//!
//! This module walks the body first, reading exactly what the decoder would
//! read (the schema in `schema` is generated from `kafka-protocol`'s own
//! decoders by `tools/gen_guard_schema.py`), and rejects the body when:
//! - an array announces more elements than bytes remain (every element takes
//!   at least one byte, so such a body can never decode);
//! - the capacity all arrays would reserve exceeds `MAX_DECODE_RESERVATION`;
//! - anything is truncated or malformed on the way.
//!
//! A body that passes is safe to decode: every `with_capacity` the decoder
//! makes is bounded by bytes that are really there.

/// Builds one [`StructDef`] per line of the generated [`schema`] table:
/// `def!(valid, tagged_from, [(lo, hi, ty), ..], [(tag, lo, hi, ty), ..])`,
/// where each `(lo, hi)` is an inclusive version range. Defined before
/// `mod schema` because `macro_rules!` is scoped textually.
macro_rules! def {
    (
        $valid:expr, $tagged_from:expr,
        [$(($lo:expr, $hi:expr, $ty:expr)),* $(,)?],
        [$(($tag:expr, $tlo:expr, $thi:expr, $tty:expr)),* $(,)?] $(,)?
    ) => {
        $crate::guard::StructDef {
            valid: $valid,
            fields: &[$($crate::guard::Field { versions: ($lo, $hi), ty: $ty }),*],
            tagged_from: $tagged_from,
            tagged: &[$($crate::guard::Tagged { tag: $tag, versions: ($tlo, $thi), ty: $tty }),*],
        }
    };
}

// Generated: one long line per structure, so rustfmt must leave it alone.
#[rustfmt::skip]
mod schema;

use kafka_protocol::messages::ApiKey;

use crate::CodecError;
use crate::header::Cursor;

/// The most memory that the arrays of one decoded body may reserve up front.
///
/// A Metadata response for a cluster of a million partitions reserves about
/// 200 MiB; one that asks for more is treated as hostile.
pub(crate) const MAX_DECODE_RESERVATION: usize = 1024 * 1024 * 1024;

/// How deeply structures may nest. The schema has no recursive structures,
/// so this only guards against a mistake in the generated table.
const MAX_DEPTH: usize = 16;

/// The wire type of one field, as `kafka-protocol` decodes it.
#[derive(Debug)]
pub(crate) enum Ty {
    /// A fixed-size value of this many bytes (ints, booleans, floats, uuids).
    Fixed(usize),
    /// A nullable string with an `i16` length.
    Str,
    /// A nullable string with an unsigned varint length plus one.
    CompactStr,
    /// Nullable bytes with an `i32` length.
    Bytes,
    /// Nullable bytes with an unsigned varint length plus one.
    CompactBytes,
    /// A nested structure, by index in the schema table.
    Struct(usize),
    /// An `i8` presence marker (1 = present) and then a structure.
    OptStruct(usize),
    /// An `i32`-counted array, with the in-memory size of one element.
    Array(&'static Ty, usize),
    /// A varint-counted array (count plus one), with the element size.
    CompactArray(&'static Ty, usize),
}

/// A field read in the versions `versions.0..=versions.1`.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) versions: (i16, i16),
    pub(crate) ty: Ty,
}

/// A tagged field that the decoder parses itself (others it skips by size).
#[derive(Debug)]
pub(crate) struct Tagged {
    pub(crate) tag: u32,
    pub(crate) versions: (i16, i16),
    pub(crate) ty: Ty,
}

/// One structure: the versions the decoder accepts, its fields in order, the
/// first version with tagged fields, and the tags it decodes.
#[derive(Debug)]
pub(crate) struct StructDef {
    pub(crate) valid: (i16, i16),
    pub(crate) fields: &'static [Field],
    pub(crate) tagged_from: i16,
    pub(crate) tagged: &'static [Tagged],
}

fn within(versions: (i16, i16), version: i16) -> bool {
    versions.0 <= version && version <= versions.1
}

/// Checks that a request body of `api_key`/`api_version` is safe to decode,
/// and returns how many bytes of `body` the decoder will read (0 for a version
/// the decoder refuses outright, which needs no check).
pub fn check_request_body(
    api_key: ApiKey,
    api_version: i16,
    body: &[u8],
) -> Result<usize, CodecError> {
    check(
        schema::request_root(api_key),
        api_key,
        api_version,
        body,
        "request",
    )
}

/// Checks that a response body of `api_key`/`api_version` is safe to decode;
/// see [`check_request_body`].
pub fn check_response_body(
    api_key: ApiKey,
    api_version: i16,
    body: &[u8],
) -> Result<usize, CodecError> {
    check(
        schema::response_root(api_key),
        api_key,
        api_version,
        body,
        "response",
    )
}

/// The versions of `api_key` whose request and response bodies
/// `kafka-protocol` can both decode.
///
/// This can be narrower than [`ApiKey::valid_versions`]: that claims
/// InitProducerId v6, a version Kafka's spec marks unstable, whose bodies the
/// crate cannot decode or encode.
pub fn decodable_versions(api_key: ApiKey) -> Option<(i16, i16)> {
    let req = schema::STRUCTS.get(schema::request_root(api_key)?)?.valid;
    let resp = schema::STRUCTS.get(schema::response_root(api_key)?)?.valid;
    let (min, max) = (req.0.max(resp.0), req.1.min(resp.1));
    (min <= max).then_some((min, max))
}

fn check(
    root: Option<usize>,
    api: ApiKey,
    version: i16,
    body: &[u8],
    kind: &'static str,
) -> Result<usize, CodecError> {
    let Some(def) = root.and_then(|i| schema::STRUCTS.get(i)) else {
        // Only possible if the schema was not regenerated after a dependency
        // bump: refuse rather than decode blind.
        return Err(CodecError::Decode {
            api,
            version,
            kind,
            reason: "no wire schema for this api; regenerate src/guard/schema.rs".to_owned(),
        });
    };
    if !within(def.valid, version) {
        // The decoder refuses the version before reading anything.
        return Ok(0);
    }
    let mut walk = Walk {
        cur: Cursor::new(body, "message body"),
        version,
        reserved: 0,
    };
    match walk.structure(def, 0) {
        Ok(()) => Ok(walk.cur.pos),
        Err(reason) => Err(CodecError::Decode {
            api,
            version,
            kind,
            reason: format!("{reason} (at byte {} of {})", walk.cur.pos, body.len()),
        }),
    }
}

/// The walk's state: where it is, and how much the decoder would reserve.
struct Walk<'a> {
    cur: Cursor<'a>,
    version: i16,
    reserved: usize,
}

impl Walk<'_> {
    fn structure(&mut self, def: &StructDef, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("structures nested too deeply".to_owned());
        }
        for field in def.fields {
            if within(field.versions, self.version) {
                self.value(&field.ty, depth)?;
            }
        }
        if self.version >= def.tagged_from {
            self.tagged_fields(def, depth)?;
        }
        Ok(())
    }

    fn tagged_fields(&mut self, def: &StructDef, depth: usize) -> Result<(), String> {
        let count = self.varint()?;
        for _ in 0..count {
            let tag = self.varint()?;
            let size = self.varint()?;
            match def.tagged.iter().find(|t| t.tag == tag) {
                // Like the decoder, read a known tag's value from the stream
                // itself; its size prefix is not consulted.
                Some(t) if within(t.versions, self.version) => self.value(&t.ty, depth)?,
                Some(_) => return Err(format!("tag {tag} is not valid in this version")),
                None => self.skip(size as usize)?,
            }
        }
        Ok(())
    }

    fn value(&mut self, ty: &Ty, depth: usize) -> Result<(), String> {
        match ty {
            Ty::Fixed(n) => self.skip(*n),
            Ty::Str => {
                let len = self.cur.i16().map_err(|e| e.to_string())?;
                self.nullable_len(i32::from(len), "string")
            }
            Ty::Bytes => {
                let len = self.cur.i32().map_err(|e| e.to_string())?;
                self.nullable_len(len, "bytes")
            }
            Ty::CompactStr | Ty::CompactBytes => match self.varint()? {
                0 => Ok(()),
                n => self.skip(n as usize - 1),
            },
            Ty::Struct(i) => self.nested(*i, depth),
            Ty::OptStruct(i) => {
                let present = self.cur.take(1).map_err(|e| e.to_string())?[0];
                if present == 1 {
                    self.nested(*i, depth)?;
                }
                Ok(())
            }
            Ty::Array(elem, size) => {
                let count = self.cur.i32().map_err(|e| e.to_string())?;
                match count {
                    -1 => Ok(()),
                    n if n < -1 => Err(format!("array length is negative ({n})")),
                    n => self.elements(elem, n.unsigned_abs() as usize, *size, depth),
                }
            }
            Ty::CompactArray(elem, size) => match self.varint()? {
                0 => Ok(()),
                n => self.elements(elem, n as usize - 1, *size, depth),
            },
        }
    }

    fn nested(&mut self, index: usize, depth: usize) -> Result<(), String> {
        let def = schema::STRUCTS
            .get(index)
            .ok_or_else(|| format!("schema has no structure {index}"))?;
        self.structure(def, depth + 1)
    }

    fn elements(
        &mut self,
        elem: &Ty,
        count: usize,
        size: usize,
        depth: usize,
    ) -> Result<(), String> {
        let left = self.cur.remaining();
        if count > left {
            return Err(format!(
                "array of {count} elements cannot fit in the {left} bytes left"
            ));
        }
        self.reserved = self.reserved.saturating_add(count.saturating_mul(size));
        if self.reserved > MAX_DECODE_RESERVATION {
            return Err(format!(
                "decoding would reserve {} bytes, more than the limit of {MAX_DECODE_RESERVATION}",
                self.reserved
            ));
        }
        if let Ty::Fixed(n) = elem {
            // Ints, uuids, ...: nothing inside to check, so the run is
            // skipped at once (the most common arrays: replica lists).
            return self.skip(count.saturating_mul(*n));
        }
        for _ in 0..count {
            self.value(elem, depth)?;
        }
        Ok(())
    }

    fn nullable_len(&mut self, len: i32, what: &str) -> Result<(), String> {
        match len {
            -1 => Ok(()),
            n if n < -1 => Err(format!("{what} length is negative ({n})")),
            n => self.skip(n.unsigned_abs() as usize),
        }
    }

    fn varint(&mut self) -> Result<u32, String> {
        self.cur.unsigned_varint().map_err(|e| e.to_string())
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        self.cur.take(n).map(|_| ()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests;
