//! Prints an AST back as canonical NNEF text (`nnefc dump --stage ast`, parser tests).
//!
//! Canonical form: one statement per line, four-space indentation, a blank line between
//! top-level items, `name = value` for named arguments, single-quoted strings (double
//! quotes only when the text contains `'`), reals in Rust's shortest round-trip form, and
//! only the parentheses that precedence requires. Parsing the output gives back the same
//! tree up to spans. Spans and comments are not printed. A hand-built tree the parser
//! cannot produce (a one-element tuple) prints as the nearest parseable text.

use crate::front::syntax::ast::*;
use std::fmt::Write;

/// The whole document as NNEF text, ending with a newline.
pub fn document(doc: &Document) -> String {
    let mut out = String::new();
    let mut blocks: Vec<String> = Vec::new();
    let mut header = String::new();
    if let Some(v) = &doc.version {
        let _ = writeln!(header, "version {}.{};", v.major, v.minor);
    }
    for ext in &doc.extensions {
        let names: Vec<&str> = ext.names.iter().map(|n| n.name.as_str()).collect();
        let _ = writeln!(header, "extension {};", names.join(", "));
    }
    if !header.is_empty() {
        blocks.push(header);
    }
    for frag in &doc.fragments {
        blocks.push(fragment(frag));
    }
    if let Some(g) = &doc.graph {
        blocks.push(graph(g));
    }
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(b);
    }
    out
}

pub fn fragment(f: &FragmentDef) -> String {
    let mut out = format!("fragment {}", f.name.name);
    match &f.generic {
        None => {}
        Some(None) => out.push_str("<?>"),
        Some(Some(t)) => {
            let _ = write!(out, "<? = {}>", type_spec(t));
        }
    }
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| match &p.default {
            Some(d) => format!("{}: {} = {}", p.name.name, type_spec(&p.ty), expr(d)),
            None => format!("{}: {}", p.name.name, type_spec(&p.ty)),
        })
        .collect();
    let results: Vec<String> = f
        .results
        .iter()
        .map(|r| format!("{}: {}", r.name.name, type_spec(&r.ty)))
        .collect();
    let _ = write!(out, "{} -> {}", paren_list(&params), paren_list(&results));
    match &f.body {
        None => out.push_str(";\n"),
        Some(body) => {
            out.push('\n');
            out.push_str(&block(body));
        }
    }
    out
}

pub fn graph(g: &GraphDef) -> String {
    let names = |v: &[Ident]| v.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
    format!(
        "graph {}{} -> {}\n{}",
        g.name.name,
        paren_list(&names(&g.params)),
        paren_list(&names(&g.results)),
        block(&g.body)
    )
}

/// `( a, b )` in the spacing of the NNEF examples, `()` when empty.
fn paren_list(items: &[String]) -> String {
    if items.is_empty() {
        "()".to_string()
    } else {
        format!("( {} )", items.join(", "))
    }
}

fn block(body: &[Assignment]) -> String {
    let mut out = String::from("{\n");
    for a in body {
        let _ = writeln!(out, "    {} = {};", expr(&a.lhs), expr(&a.rhs));
    }
    out.push_str("}\n");
    out
}

pub fn type_spec(t: &TypeSpec) -> String {
    match t {
        TypeSpec::Prim(p, _) => prim_name(*p).to_string(),
        TypeSpec::Generic(_) => "?".to_string(),
        TypeSpec::Tensor(None, _) => "tensor<>".to_string(),
        TypeSpec::Tensor(Some(inner), _) => format!("tensor<{}>", type_spec(inner)),
        TypeSpec::Array(inner, _) => format!("{}[]", type_spec(inner)),
        TypeSpec::Tuple(items, _) => {
            format!(
                "({})",
                items.iter().map(type_spec).collect::<Vec<_>>().join(", ")
            )
        }
    }
}

pub fn prim_name(p: PrimType) -> &'static str {
    match p {
        PrimType::Integer => "integer",
        PrimType::Scalar => "scalar",
        PrimType::Logical => "logical",
        PrimType::String => "string",
    }
}

/// Binding strength of each expression form, loosest first. A child printed where a
/// tighter form is required gets parentheses.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Prec {
    IfElse,
    Or,
    And,
    Cmp,
    Add,
    Mul,
    Pow,
    Unary,
    Postfix,
}

fn binary_prec(op: BinaryOp) -> Prec {
    match op {
        BinaryOp::Or => Prec::Or,
        BinaryOp::And => Prec::And,
        BinaryOp::Lt
        | BinaryOp::Gt
        | BinaryOp::Le
        | BinaryOp::Ge
        | BinaryOp::Eq
        | BinaryOp::Ne
        | BinaryOp::In => Prec::Cmp,
        BinaryOp::Add | BinaryOp::Sub => Prec::Add,
        BinaryOp::Mul | BinaryOp::Div => Prec::Mul,
        BinaryOp::Pow => Prec::Pow,
    }
}

fn next_tighter(p: Prec) -> Prec {
    match p {
        Prec::IfElse => Prec::Or,
        Prec::Or => Prec::And,
        Prec::And => Prec::Cmp,
        Prec::Cmp => Prec::Add,
        Prec::Add => Prec::Mul,
        Prec::Mul => Prec::Pow,
        Prec::Pow => Prec::Unary,
        Prec::Unary | Prec::Postfix => Prec::Postfix,
    }
}

pub fn binary_op(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Pow => "^",
        BinaryOp::Lt => "<",
        BinaryOp::Gt => ">",
        BinaryOp::Le => "<=",
        BinaryOp::Ge => ">=",
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::And => "&&",
        BinaryOp::Or => "||",
        BinaryOp::In => "in",
    }
}

pub fn unary_op(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-",
        UnaryOp::Plus => "+",
        UnaryOp::Not => "!",
    }
}

pub fn builtin_name(b: Builtin) -> &'static str {
    match b {
        Builtin::LengthOf => "length_of",
        Builtin::RangeOf => "range_of",
        Builtin::ShapeOf => "shape_of",
        Builtin::Cast(p) => prim_name(p),
    }
}

fn prec_of(e: &Expr) -> Prec {
    match &e.kind {
        ExprKind::IfElse { .. } => Prec::IfElse,
        ExprKind::Binary { op, .. } => binary_prec(*op),
        ExprKind::Unary { .. } => Prec::Unary,
        _ => Prec::Postfix,
    }
}

/// One expression as NNEF text.
pub fn expr(e: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, e, Prec::IfElse);
    out
}

pub fn literal(lit: &Literal) -> String {
    match lit {
        Literal::Integer(i) => i.to_string(),
        // `{:?}` is the shortest text that reads back as the same f64, and always has a
        // `.` or an exponent, so it lexes as a real again.
        Literal::Scalar(x) => format!("{x:?}"),
        Literal::Logical(b) => b.to_string(),
        Literal::String(s) if s.contains('\'') => format!("\"{s}\""),
        Literal::String(s) => format!("'{s}'"),
    }
}

fn write_list(out: &mut String, items: &[Expr]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, item, Prec::IfElse);
    }
}

fn write_expr(out: &mut String, e: &Expr, min: Prec) {
    let parens = prec_of(e) < min;
    if parens {
        out.push('(');
    }
    match &e.kind {
        ExprKind::Literal(lit) => out.push_str(&literal(lit)),
        ExprKind::Ident(name) => out.push_str(name),
        ExprKind::Array(items) => {
            out.push('[');
            write_list(out, items);
            out.push(']');
        }
        ExprKind::Tuple(items) => {
            out.push('(');
            write_list(out, items);
            out.push(')');
        }
        ExprKind::Invocation {
            name,
            generic,
            args,
        } => {
            out.push_str(&name.name);
            if let Some(t) = generic {
                let _ = write!(out, "<{}>", type_spec(t));
            }
            out.push('(');
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if let Some(n) = &arg.name {
                    let _ = write!(out, "{} = ", n.name);
                }
                write_expr(out, &arg.value, Prec::IfElse);
            }
            out.push(')');
        }
        ExprKind::Builtin { func, arg } => {
            let _ = write!(out, "{}(", builtin_name(*func));
            write_expr(out, arg, Prec::IfElse);
            out.push(')');
        }
        ExprKind::Unary { op, operand } => {
            out.push_str(unary_op(*op));
            write_expr(out, operand, Prec::Unary);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            let p = binary_prec(*op);
            // Left-associative levels need a tighter right operand; `^` is right-associative
            // and its left operand is a unary expression.
            let (lp, rp) = if *op == BinaryOp::Pow {
                (Prec::Unary, Prec::Pow)
            } else {
                (p, next_tighter(p))
            };
            write_expr(out, lhs, lp);
            let _ = write!(out, " {} ", binary_op(*op));
            write_expr(out, rhs, rp);
        }
        ExprKind::IfElse {
            cond,
            then,
            otherwise,
        } => {
            write_expr(out, then, Prec::Or);
            out.push_str(" if ");
            // A nested `if` in the condition parses without parentheses, but they read better.
            write_expr(out, cond, Prec::Or);
            out.push_str(" else ");
            write_expr(out, otherwise, Prec::IfElse);
        }
        ExprKind::Subscript { base, index } => {
            write_expr(out, base, Prec::Postfix);
            out.push('[');
            match index.as_ref() {
                Index::Single(i) => write_expr(out, i, Prec::IfElse),
                Index::Range(a, b) => {
                    if let Some(a) = a {
                        write_expr(out, a, Prec::IfElse);
                    }
                    out.push(':');
                    if let Some(b) = b {
                        write_expr(out, b, Prec::IfElse);
                    }
                }
            }
            out.push(']');
        }
        ExprKind::Comprehension {
            iters,
            filter,
            body,
        } => {
            out.push_str("[for ");
            for (i, (pattern, iterable)) in iters.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{} in ", pattern.text());
                write_expr(out, iterable, Prec::Or);
            }
            if let Some(f) = filter {
                out.push_str(" if ");
                write_expr(out, f, Prec::IfElse);
            }
            out.push_str(" yield ");
            write_expr(out, body, Prec::IfElse);
            out.push(']');
        }
    }
    if parens {
        out.push(')');
    }
}
