#!/usr/bin/env python3
"""Generates crates/sluice-codec/src/guard/schema.rs from kafka-protocol's sources.

Why: kafka-protocol 0.18 sizes every array with `Vec::with_capacity(n)` where
`n` comes straight off the wire, so a few malicious bytes can ask for hundreds
of GiB and abort the process. Sluice walks a body before decoding it and
rejects impossible counts. The walk must read exactly what the decoder reads,
so its schema is derived from the decoder's own generated code rather than
written by hand.

Usage:
    python3 tools/gen_guard_schema.py [path/to/kafka-protocol] > src/guard/schema.rs
`scripts/codegen` runs it on vendor/kafka-protocol. Without a path, the newest
kafka-protocol in ~/.cargo/registry/src is used.
"""

import glob
import os
import re
import sys

MAX_VERSION = 64
ALL = frozenset(range(0, MAX_VERSION + 1))

FIXED = {
    "Int8": 1, "Boolean": 1, "Int16": 2, "UInt16": 2, "Int32": 4,
    "UInt32": 4, "Int64": 8, "Float64": 8, "Uuid": 16,
}
SIMPLE = {"String": "S", "CompactString": "Cs", "Bytes": "B", "CompactBytes": "Cb"}

# Short names for `Ty`'s variants, so that each structure fits on one line.
ALIASES = [("Fixed", "Fx"), ("Str", "S"), ("CompactStr", "Cs"), ("Bytes", "B"),
           ("CompactBytes", "Cb"), ("Struct", "St"), ("OptStruct", "Ost"),
           ("Array", "A"), ("CompactArray", "Ca")]
# How many `ApiKey => index` arms to print per line of the root functions.
ARMS_PER_LINE = 4


def find_crate():
    if len(sys.argv) > 1:
        return sys.argv[1]
    pattern = os.path.expanduser("~/.cargo/registry/src/*/kafka-protocol-*")
    found = sorted(glob.glob(pattern))
    if not found:
        sys.exit("kafka-protocol sources not found; pass the crate path")
    return found[-1]


def match_brace(text, open_at):
    """Index just past the brace that closes the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced braces")


def split_statements(body):
    """Top-level statements of a block: `...;` or `if/for ... { }` items."""
    out, i, n = [], 0, len(body)
    while i < n:
        while i < n and body[i].isspace():
            i += 1
        if i >= n:
            break
        depth, j = 0, i
        while j < n:
            c = body[j]
            if c in "({[":
                depth += 1
            elif c in ")}]":
                depth -= 1
                if depth == 0 and c == "}" and body[i:].startswith(("if ", "for ", "match ")):
                    rest = body[j + 1:].lstrip()
                    if not rest.startswith("else"):
                        j += 1
                        break
            elif c == ";" and depth == 0:
                j += 1
                break
            j += 1
        out.append(body[i:j].strip())
        i = j
    return out


def cond_set(cond):
    cond = cond.strip()
    if "||" in cond:
        s = set()
        for part in cond.split("||"):
            s |= cond_set(part)
        return frozenset(s)
    if "&&" in cond:
        s = set(ALL)
        for part in cond.split("&&"):
            s &= cond_set(part)
        return frozenset(s)
    m = re.fullmatch(r"version\s*(>=|<=|==|!=|<|>)\s*(-?\d+)", cond)
    if not m:
        raise ValueError(f"unknown condition {cond!r}")
    op, v = m.group(1), int(m.group(2))
    ops = {">=": lambda x: x >= v, "<=": lambda x: x <= v, "==": lambda x: x == v,
           "!=": lambda x: x != v, "<": lambda x: x < v, ">": lambda x: x > v}
    return frozenset(x for x in ALL if ops[op](x))


def parse_if(expr):
    """Splits `if C { A } else { B }` / `else if` into (C, A, B or None)."""
    brace = expr.index("{")
    cond = expr[3:brace]
    end = match_brace(expr, brace)
    then = expr[brace + 1:end - 1]
    rest = expr[end:].strip()
    other = None
    if rest.startswith("else"):
        rest = rest[4:].strip()
        if rest.startswith("if "):
            other = rest
        else:
            other = rest[1:match_brace(rest, 0) - 1]
    return cond, then.strip(), (other.strip() if other is not None else None)


class Struct:
    def __init__(self, module, name):
        self.module, self.name = module, name
        self.field_types = {}
        self.fields = []  # (versions, ty)
        self.tagged = []  # (tag, versions, ty)
        self.tagged_versions = frozenset()
        self.valid = ALL


def inner_type(rust_type):
    t = rust_type.strip().rstrip(",")
    while True:
        m = re.fullmatch(r"(?:Option|Vec)<(.*)>", t)
        if not m:
            return t
        t = m.group(1)


def parse_type(typ, field, st, structs):
    typ = typ.strip()
    m = re.fullmatch(r"types::(\w+)", typ)
    if m:
        name = m.group(1)
        if name in FIXED:
            return f"Fx({FIXED[name]})"
        if name in SIMPLE:
            return SIMPLE[name]
        raise ValueError(f"unknown type {typ}")
    m = re.fullmatch(r"types::(Compact)?Array\((.*)\)", typ)
    if m:
        elem = parse_type(m.group(2), field, st, structs)
        size = elem_size(field, st, structs)
        kind = "Ca" if m.group(1) else "A"
        return f"{kind}(&{elem}, {size})"
    m = re.fullmatch(r"types::(Option)?Struct \{ version \}", typ)
    if m:
        target = struct_ref(field, st, structs)
        return f"{'Ost' if m.group(1) else 'St'}({target})"
    raise ValueError(f"unknown type expression {typ}")


def elem_size(field, st, structs):
    inner = inner_type(st.field_types[field])
    if (st.module, inner) in structs:
        return f"size_of::<{st.module}::{inner}>()"
    if inner.startswith("super::"):
        return f"size_of::<{inner[len('super::'):]}>()"
    if inner == "StrBytes":
        return "size_of::<kafka_protocol::protocol::StrBytes>()"
    if inner == "Uuid":
        return "size_of::<[u8; 16]>()"
    if re.fullmatch(r"[iu](8|16|32|64)|bool|f64", inner):
        return f"size_of::<{inner}>()"
    raise ValueError(f"{st.name}.{field}: unknown element type {inner}")


def struct_ref(field, st, structs):
    inner = inner_type(st.field_types[field])
    key = (st.module, inner)
    if key not in structs:
        raise ValueError(f"{st.module}::{st.name}.{field}: unknown struct {inner}")
    return key


def add_expr(expr, versions, field, st, structs, out):
    expr = expr.strip()
    if expr.startswith("if "):
        cond, then, other = parse_if(expr)
        c = cond_set(cond)
        add_expr(then, versions & c, field, st, structs, out)
        if other is not None:
            add_expr(other, versions - c, field, st, structs, out)
        return
    if expr.startswith("bail!"):
        out.append((versions, "BAIL"))
        return
    m = re.fullmatch(r"(?:\w+\s*=\s*)?(types::.*)\.decode\(buf\)\?;?", expr, re.S)
    if m:
        if versions:
            out.append((versions, parse_type(m.group(1), field, st, structs)))
        return
    if ".decode(" in expr:
        raise ValueError(f"unhandled decode expression {expr!r}")
    # A default value: nothing is read in these versions.


def parse_tag_block(block, versions, st, structs):
    st.tagged_versions = versions
    m = re.search(r"match tag \{", block)
    if not m:
        return
    start = m.end() - 1
    arms = block[start + 1:match_brace(block, start) - 1]
    for am in re.finditer(r"(\d+) => \{", arms):
        body_start = am.end() - 1
        body = arms[body_start + 1:match_brace(arms, body_start) - 1].strip()
        fm = re.search(r"(\w+)\s*=\s*types::", body)
        if not fm:
            raise ValueError(f"tagged arm without field: {body!r}")
        parts = []
        add_expr(body, ALL, fm.group(1), st, structs, parts)
        for vs, ty in parts:
            if ty != "BAIL":
                st.tagged.append((int(am.group(1)), vs, ty))


def parse_decode(st, body, structs):
    for stmt in split_statements(body):
        if stmt.startswith("if version") and "num_tagged_fields" not in stmt and "bail!" in stmt:
            cond = stmt[3:stmt.index("{")]
            st.valid = ALL - cond_set(cond)
        elif stmt.startswith(("let mut ", "Ok(Self")):
            continue
        elif stmt.startswith("let num_tagged_fields"):
            continue
        elif stmt.startswith("for _ in 0..num_tagged_fields"):
            parse_tag_block(stmt, ALL, st, structs)
        elif stmt.startswith("if ") and "num_tagged_fields" in stmt:
            cond, then, _ = parse_if(stmt)
            parse_tag_block(then, cond_set(cond), st, structs)
        elif stmt.startswith("let "):
            m = re.match(r"let (\w+)\s*=\s*(.*);$", stmt, re.S)
            if not m:
                raise ValueError(f"{st.name}: unparsed statement {stmt!r}")
            add_expr(m.group(2), ALL, m.group(1), st, structs, st.fields)
        else:
            raise ValueError(f"{st.name}: unparsed statement {stmt!r}")


def load(crate):
    structs, decodes = {}, []
    for path in sorted(glob.glob(os.path.join(crate, "src/messages/*.rs"))):
        module = os.path.basename(path)[:-3]
        text = open(path).read()
        for m in re.finditer(r"pub struct (\w+) \{", text):
            st = Struct(module, m.group(1))
            block = text[m.end() - 1:match_brace(text, m.end() - 1)]
            for fm in re.finditer(r"pub (\w+): (.+),\n", block):
                st.field_types[fm.group(1)] = fm.group(2)
            structs[(module, st.name)] = st
        for m in re.finditer(r"impl Decodable for (\w+) \{", text):
            fn = text.index("fn decode", m.end())
            brace = text.index("{", text.index("->", fn))
            body = text[brace + 1:match_brace(text, brace) - 1]
            decodes.append(((module, m.group(1)), body))
    for key, body in decodes:
        parse_decode(structs[key], body, structs)
    return structs


def roots(crate):
    text = open(os.path.join(crate, "src/messages.rs")).read()
    req = re.findall(r"ApiKey::(\w+) => \{?\s*(\w+Request)::header_version", text)
    resp = re.findall(r"ApiKey::(\w+) => \{?\s*(\w+Response)::header_version", text)
    return req, resp


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def ranges(vs):
    vs = sorted(vs)
    out, i = [], 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        hi = vs[j] if vs[j] < MAX_VERSION else "M"
        out.append((vs[i], hi))
        i = j + 1
    return out


def main():
    crate = find_crate()
    structs = load(crate)
    req, resp = roots(crate)
    reachable, order = {}, []

    def visit(key):
        if key in reachable:
            return
        reachable[key] = len(order)
        order.append(key)
        st = structs[key]
        for _, ty in st.fields + [(v, t) for _, v, t in st.tagged]:
            for ref in re.findall(r"\('(\w+)', '(\w+)'\)", ty):
                visit(ref)

    for _, name in req + resp:
        visit((snake(name), name))

    def render(ty):
        return re.sub(r"\('(\w+)', '(\w+)'\)", lambda m: str(reachable[(m.group(1), m.group(2))]), ty)

    version = os.path.basename(crate.rstrip("/"))
    with open(os.path.join(crate, "Cargo.toml")) as f:
        found = re.search(r'^version = "([^"]+)"', f.read(), re.M)
    if found:
        version = f"kafka-protocol-{found.group(1)}"
    aliases = ", ".join(f"{v} as {a}" if v != a else v for v, a in ALIASES)
    print("//! Wire schema of every Kafka message body, for [`super`]'s pre-decode walk.")
    print("//!")
    print(f"//! GENERATED by `tools/gen_guard_schema.py` from {version}; do not edit.")
    print("//! `scripts/codegen` regenerates it with the `kafka-protocol` crate (docs/codec.md).")
    print("//!")
    print("//! One [`super::StructDef`] per line, built by `def!` (see [`super`]):")
    print("//! `def!(valid, tagged_from, [(lo, hi, ty), ..], [(tag, lo, hi, ty), ..])`.")
    print("//! `M` = `i16::MAX`; the `Ty` variants are abbreviated:")
    for v, a in ALIASES:
        print(f"//! - `{a}` = `Ty::{v}`")
    print()
    print("use std::mem::size_of;")
    print()
    print("use kafka_protocol::messages::*;")
    print()
    print("use super::StructDef;")
    print(f"use super::Ty::{{{aliases}}};")
    print()
    print("/// The open upper end of a version range.")
    print("const M: i16 = i16::MAX;")
    print()
    print(f"pub(super) static STRUCTS: [StructDef; {len(order)}] = [")
    for key in order:
        st = structs[key]
        vr = ranges(st.valid)
        fields = [f"({lo}, {hi}, {render(ty)})"
                  for vs, ty in st.fields for lo, hi in ranges(vs)]
        tv = ranges(st.tagged_versions)
        if len(tv) > 1 or (tv and tv[0][1] != "M"):
            raise ValueError(f"{st.name}: tagged fields in a version gap {tv}")
        tagged_from = tv[0][0] if tv else "M"
        tagged = [f"({tag}, {lo}, {hi}, {render(ty)})"
                  for tag, vs, ty in st.tagged for lo, hi in ranges(vs)]
        print(f"    def!(({vr[0][0]}, {vr[-1][1]}), {tagged_from}, [{', '.join(fields)}], "
              f"[{', '.join(tagged)}]), // {reachable[key]}: {st.module}::{st.name}")
    print("];")
    for fn, items in (("request_root", req), ("response_root", resp)):
        arms = [f"ApiKey::{api} => {reachable[(snake(name), name)]}," for api, name in items]
        print()
        print(f"/// Index in [`STRUCTS`] of the body of a {fn.split('_')[0]} for `api_key`.")
        print(f"pub(super) fn {fn}(api_key: ApiKey) -> Option<usize> {{")
        print("    Some(match api_key {")
        for i in range(0, len(arms), ARMS_PER_LINE):
            print("        " + " ".join(arms[i:i + ARMS_PER_LINE]))
        print("        #[allow(unreachable_patterns)]")
        print("        _ => return None,")
        print("    })")
        print("}")

if __name__ == "__main__":
    main()
