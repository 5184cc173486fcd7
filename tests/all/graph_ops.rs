//! The generator of `src/graph/ops.rs` (one typed Rust function per fragment of
//! `stdlib.nnef`) and the test that keeps the checked-in file equal to its output:
//! `UPDATE_EXPECT=1 cargo test --test all graph_ops` regenerates it after the stdlib
//! changes. A second test checks that every fragment of the registry has its function.
//!
//! Mapping: tensor parameters without a default are positional (`impl Into<Arg>`, so a
//! literal such as `1.0` works where NNEF allows one; `&[Value]` for tensor arrays);
//! attributes without a default are positional with their Rust type; every parameter with
//! a default is a field of `<Name>Attrs`, whose `Default` is the fragment's default (a
//! tensor default is `None`). Only fields that differ from the default are written into
//! the NNEF call. One tensor result is a `Value`, an array result `Vec<Value>`, several
//! results a tuple. A generic fragment that no tensor argument types (`cast`) takes the
//! type as a `DType`. `external`, `variable` and `constant` create values and go through
//! `Graph` methods.

use nnefc::compiler::front::call::Library;
use nnefc::compiler::front::expand::signature;
use nnefc::compiler::front::syntax::ast::{
    Expr, ExprKind, FragmentDef, Literal, PrimType, TypeSpec, UnaryOp,
};
use std::fmt::Write;

const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

fn rust_ident(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !s.ends_with('_') {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    if RUST_KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

fn camel(name: &str) -> String {
    name.split('_')
        .map(|p| {
            let mut cs = p.chars();
            match cs.next() {
                Some(c) => c.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn is_tensor(t: &TypeSpec) -> bool {
    match t {
        TypeSpec::Tensor(..) => true,
        TypeSpec::Array(inner, _) => is_tensor(inner),
        _ => false,
    }
}

fn mentions_generic_tensor(t: &TypeSpec) -> bool {
    match t {
        TypeSpec::Tensor(Some(inner), _) => matches!(**inner, TypeSpec::Generic(_)),
        TypeSpec::Array(inner, _) => mentions_generic_tensor(inner),
        TypeSpec::Tuple(xs, _) => xs.iter().any(mentions_generic_tensor),
        _ => false,
    }
}

fn rust_type(t: &TypeSpec) -> String {
    match t {
        TypeSpec::Prim(PrimType::Integer, _) => "i64".into(),
        TypeSpec::Prim(PrimType::Scalar, _) => "f32".into(),
        TypeSpec::Prim(PrimType::Logical, _) => "bool".into(),
        TypeSpec::Prim(PrimType::String, _) => "String".into(),
        TypeSpec::Generic(_) | TypeSpec::Tensor(..) => "Arg".into(),
        TypeSpec::Array(inner, _) => format!("Vec<{}>", rust_type(inner)),
        TypeSpec::Tuple(xs, _) => {
            let parts: Vec<String> = xs.iter().map(rust_type).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// A default value as a Rust expression of `rust_type(ty)`.
fn rust_default(e: &Expr, ty: &TypeSpec) -> String {
    match (&e.kind, ty) {
        (ExprKind::Literal(Literal::Integer(i)), TypeSpec::Prim(PrimType::Scalar, _)) => {
            format!("{i}.0")
        }
        (ExprKind::Literal(Literal::Integer(i)), _) => i.to_string(),
        (ExprKind::Literal(Literal::Scalar(x)), _) => format!("{:?}", *x as f32),
        (ExprKind::Literal(Literal::Logical(b)), _) => b.to_string(),
        (ExprKind::Literal(Literal::String(s)), _) => format!("{s:?}.to_string()"),
        (
            ExprKind::Unary {
                op: UnaryOp::Neg,
                operand,
            },
            _,
        ) => format!("-{}", rust_default(operand, ty)),
        (ExprKind::Array(xs), TypeSpec::Array(inner, _)) => {
            let parts: Vec<String> = xs.iter().map(|x| rust_default(x, inner)).collect();
            format!("vec![{}]", parts.join(", "))
        }
        (ExprKind::Tuple(xs), TypeSpec::Tuple(ts, _)) => {
            let parts: Vec<String> = xs.iter().zip(ts).map(|(x, t)| rust_default(x, t)).collect();
            format!("({})", parts.join(", "))
        }
        other => panic!("a stdlib default the generator cannot write: {other:?}"),
    }
}

/// The NNEF declaration line of a fragment, for the doc comment.
fn doc_line(def: &FragmentDef) -> String {
    signature(def).trim_start_matches("signature: ").to_string()
}

fn gen_fragment(def: &FragmentDef, out: &mut String) {
    let name = def.name.name.as_str();
    let fname = rust_ident(name);
    let attrs_name = format!("{}Attrs", camel(name));
    let optional: Vec<_> = def.params.iter().filter(|p| p.default.is_some()).collect();
    let needs_dtype =
        def.generic.is_some() && !def.params.iter().any(|p| mentions_generic_tensor(&p.ty));
    // The attributes struct.
    if !optional.is_empty() {
        writeln!(
            out,
            "/// The optional parameters of [`{fname}`], defaulting as in `stdlib.nnef`."
        )
        .unwrap();
        writeln!(out, "#[derive(Clone, Debug)]").unwrap();
        writeln!(out, "pub struct {attrs_name} {{").unwrap();
        for p in &optional {
            let t = if is_tensor(&p.ty) {
                "Option<Arg>".to_string()
            } else {
                rust_type(&p.ty)
            };
            writeln!(out, "    /// `{}`.", p.name.name).unwrap();
            writeln!(out, "    pub {}: {t},", rust_ident(&p.name.name)).unwrap();
        }
        writeln!(out, "}}\n").unwrap();
        writeln!(out, "impl Default for {attrs_name} {{").unwrap();
        writeln!(out, "    fn default() -> Self {{").unwrap();
        writeln!(out, "        {attrs_name} {{").unwrap();
        for p in &optional {
            let v = if is_tensor(&p.ty) {
                "None".to_string()
            } else {
                rust_default(p.default.as_ref().expect("optional"), &p.ty)
            };
            writeln!(out, "            {}: {v},", rust_ident(&p.name.name)).unwrap();
        }
        writeln!(out, "        }}\n    }}\n}}\n").unwrap();
    }
    // The function.
    let mut params = Vec::new();
    let mut pushes = Vec::new();
    for p in def.params.iter().filter(|p| p.default.is_none()) {
        let id = rust_ident(&p.name.name);
        if is_tensor(&p.ty) {
            if matches!(p.ty, TypeSpec::Array(..)) {
                params.push(format!("{id}: &[Value]"));
                pushes.push(format!("(None, Arg::from({id}))"));
            } else {
                params.push(format!("{id}: impl Into<Arg>"));
                pushes.push(format!("(None, {id}.into())"));
            }
        } else {
            params.push(format!("{id}: {}", rust_type(&p.ty)));
            pushes.push(format!("(Some({:?}), Arg::from({id}))", p.name.name));
        }
    }
    if needs_dtype {
        params.push("dtype: DType".into());
    }
    if !optional.is_empty() {
        params.push(format!("attrs: {attrs_name}"));
    }
    let ret = if def.results.len() > 1 {
        let parts: Vec<&str> = def
            .results
            .iter()
            .map(|r| {
                if matches!(r.ty, TypeSpec::Array(..)) {
                    "Vec<Value>"
                } else {
                    "Value"
                }
            })
            .collect();
        format!("({})", parts.join(", "))
    } else if matches!(def.results[0].ty, TypeSpec::Array(..)) {
        "Vec<Value>".into()
    } else {
        "Value".into()
    };
    writeln!(out, "/// `{}`", doc_line(def)).unwrap();
    writeln!(out, "#[track_caller]").unwrap();
    writeln!(
        out,
        "pub fn {fname}({}) -> Result<{ret}> {{",
        params.join(", ")
    )
    .unwrap();
    let mutability = if optional.is_empty() { "" } else { "mut " };
    writeln!(
        out,
        "    let {mutability}args: Vec<(Option<&str>, Arg)> = vec![{}];",
        pushes.join(", ")
    )
    .unwrap();
    if !optional.is_empty() {
        if optional.iter().any(|p| !is_tensor(&p.ty)) {
            writeln!(out, "    let default = {attrs_name}::default();").unwrap();
        }
        for p in &optional {
            let id = rust_ident(&p.name.name);
            if is_tensor(&p.ty) {
                writeln!(out, "    if let Some(v) = attrs.{id} {{").unwrap();
                writeln!(out, "        args.push((Some({:?}), v));", p.name.name).unwrap();
                writeln!(out, "    }}").unwrap();
            } else {
                writeln!(out, "    if attrs.{id} != default.{id} {{").unwrap();
                writeln!(
                    out,
                    "        args.push((Some({:?}), Arg::from(attrs.{id})));",
                    p.name.name
                )
                .unwrap();
                writeln!(out, "    }}").unwrap();
            }
        }
    }
    let generic = if needs_dtype { "Some(dtype)" } else { "None" };
    writeln!(out, "    let outputs = invoke({name:?}, {generic}, args)?;").unwrap();
    if def.results.len() > 1 {
        writeln!(
            out,
            "    let mut parts = outputs.parts({})?.into_iter();",
            def.results.len()
        )
        .unwrap();
        let parts: Vec<String> = def
            .results
            .iter()
            .map(|r| {
                if matches!(r.ty, TypeSpec::Array(..)) {
                    "parts.next().map(Outputs::values).unwrap_or_default()".to_string()
                } else {
                    "Outputs::single_or(parts.next())?".to_string()
                }
            })
            .collect();
        writeln!(out, "    Ok(({}))", parts.join(", ")).unwrap();
    } else if matches!(def.results[0].ty, TypeSpec::Array(..)) {
        writeln!(out, "    Ok(outputs.values())").unwrap();
    } else {
        writeln!(out, "    outputs.single()").unwrap();
    }
    writeln!(out, "}}\n").unwrap();
}

const HEADER: &str = "//! Typed functions for every fragment of `stdlib.nnef`. GENERATED by
//! `tests/all/graph_ops.rs` from the stdlib: do not edit; regenerate with
//! `UPDATE_EXPECT=1 cargo test --test all graph_ops`.
//!
//! Each function adds one invocation to the graph of its first tensor argument, checked at
//! the call (see [`crate::graph`]). Tensor parameters take a [`Value`] or a literal
//! (`add(&x, 1.0)`); parameters with a default are fields of the op's `…Attrs` struct,
//! whose `Default` is the fragment's. `external`, `variable` and `constant` create values
//! and take the graph. This module holds no logic beyond that mapping.

#![allow(clippy::too_many_arguments)]

use super::{Arg, Graph, Outputs, Result, Value, invoke};
use nnefc_compiler::ir::{DType, Tensor};

/// `external<? = scalar>(shape: integer[]) -> (output: tensor<?>)`: a graph input
/// ([`Graph::input_dims`]).
#[track_caller]
pub fn external(graph: &Graph, name: &str, dtype: DType, shape: &[Option<usize>]) -> Result<Value> {
    graph.input_dims(name, dtype, shape)
}

/// `variable<? = scalar>(shape: integer[], label: string) -> (output: tensor<?>)`: a
/// weight with its data ([`Graph::variable`]).
#[track_caller]
pub fn variable(graph: &Graph, label: &str, data: Tensor) -> Result<Value> {
    graph.variable(label, data)
}

/// `constant<? = scalar>(shape: integer[], value: ?[]) -> (output: tensor<?>)`: a
/// tensor written into the NNEF text ([`Graph::constant`]).
#[track_caller]
pub fn constant(graph: &Graph, data: &Tensor) -> Result<Value> {
    graph.constant(data)
}

";

/// Values created by `Graph` methods rather than by an invocation.
const CREATORS: &[&str] = &["external", "variable", "constant"];

pub fn generate() -> String {
    let lib = Library::new("").expect("the stdlib parses");
    let mut out = String::from(HEADER);
    for def in lib.stdlib_fragments() {
        if !CREATORS.contains(&def.name.name.as_str()) {
            gen_fragment(def, &mut out);
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[test]
fn generated_ops_match_the_stdlib() {
    expect_test::expect_file!["../../src/graph/ops.rs"].assert_eq(&generate());
}

#[test]
fn every_stdlib_fragment_has_a_function() {
    let lib = Library::new("").expect("the stdlib parses");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/graph/ops.rs"))
        .expect("ops.rs");
    let mut missing = Vec::new();
    for def in lib.stdlib_fragments() {
        let f = rust_ident(&def.name.name);
        if !text.contains(&format!("pub fn {f}(")) {
            missing.push(def.name.name.clone());
        }
    }
    assert!(missing.is_empty(), "no function for: {missing:?}");
    assert!(lib.stdlib_fragments().len() > 100);
}
