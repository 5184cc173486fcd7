//! The fragment table: every operation a document may invoke, from our `stdlib.nnef`
//! and from the document's own `fragment` definitions, with their signatures checked.
//!
//! Checks here need no evaluation: redefinitions (pointing at both definitions),
//! parameter/result name clashes, tensor-before-attribute parameter order, result kinds,
//! `?` ⇔ generic declaration, `tensor<>` placement, default values, operations that are
//! forbidden inside fragments, and the document-level extension gates (fragments need
//! `KHR_enable_fragment_definitions`, anything beyond (possibly nested) invocations
//! needs `KHR_enable_operator_expressions`). Recursion between fragments is allowed (NNEF's
//! `add_n` is recursive); termination is checked while expanding, not here.

use super::syntax::ast::{
    Document, Expr, ExprKind, FragmentDef, Index, Literal, TypeSpec, UnaryOp,
};
use super::value::{describe_spec, spec_has_unbound_tensor, spec_is_tensor, spec_uses_generic};
use crate::diag::{Diagnostic, Diagnostics, Span};
use std::collections::{BTreeMap, HashMap};

pub const EXT_FRAGMENTS: &str = "KHR_enable_fragment_definitions";
pub const EXT_OPERATORS: &str = "KHR_enable_operator_expressions";

/// Which document defined a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Stdlib,
    User,
}

#[derive(Clone, Debug)]
pub struct Fragment {
    pub def: FragmentDef,
    pub origin: Origin,
}

impl Fragment {
    pub fn name(&self) -> &str {
        &self.def.name.name
    }
    pub fn is_primitive(&self) -> bool {
        self.def.body.is_none()
    }
}

/// Name → fragment, for stdlib and user fragments alike (no overloading, no shadowing).
#[derive(Default, Debug)]
pub struct FragmentTable {
    map: HashMap<String, Fragment>,
}

/// The extension switches of one document.
#[derive(Clone, Copy, Debug, Default)]
pub struct Features {
    pub fragments: bool,
    pub operators: bool,
}

impl FragmentTable {
    /// Builds the table from the stdlib and the user document. Collects every
    /// declaration error rather than stopping at the first.
    pub fn build(stdlib: &Document, user: &Document) -> Result<FragmentTable, Diagnostics> {
        let mut table = FragmentTable::default();
        let mut errors = Vec::new();
        for (doc, origin) in [(stdlib, Origin::Stdlib), (user, Origin::User)] {
            for def in &doc.fragments {
                if let Some(prev) = table.map.get(&def.name.name) {
                    let where_ = match prev.origin {
                        Origin::Stdlib => "the standard library defines it here",
                        Origin::User => "first defined here",
                    };
                    errors.push(
                        Diagnostic::error(format!(
                            "operation `{}` is already defined",
                            def.name.name
                        ))
                        .at(def.name.span, "redefined here")
                        .with_label(prev.def.name.span, where_)
                        .with_note(
                            "NNEF has no overloading or shadowing: choose another fragment name",
                        ),
                    );
                    continue;
                }
                check_signature(def, origin, &mut errors);
                table.map.insert(
                    def.name.name.clone(),
                    Fragment {
                        def: def.clone(),
                        origin,
                    },
                );
            }
        }
        if errors.is_empty() {
            Ok(table)
        } else {
            Err(Diagnostics(errors))
        }
    }

    pub fn get(&self, name: &str) -> Option<&Fragment> {
        self.map.get(name)
    }

    /// The known name closest to `name` (edit distance ≤ 2), for "did you mean".
    pub fn suggest(&self, name: &str) -> Option<&str> {
        let mut best: Option<(usize, &str)> = None;
        for k in self.map.keys() {
            let d = edit_distance(name, k);
            if d <= 2 && best.is_none_or(|(bd, bk)| d < bd || (d == bd && k.as_str() < bk)) {
                best = Some((d, k));
            }
        }
        best.map(|(_, k)| k)
    }
}

/// Optimal-string-alignment distance: edits plus adjacent transpositions (`rleu` → `relu` is 1).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    if let Some(first) = d.first_mut() {
        for (j, cell) in first.iter_mut().enumerate() {
            *cell = j;
        }
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// Spec §8.2 rules 6–11 and 13 for one fragment.
fn check_signature(def: &FragmentDef, origin: Origin, errors: &mut Vec<Diagnostic>) {
    let fname = &def.name.name;
    // Rule 6: unique names across parameters and results.
    let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
    let names = def
        .params
        .iter()
        .map(|p| (&p.name, "parameter"))
        .chain(def.results.iter().map(|r| (&r.name, "result")));
    for (ident, kind) in names {
        if let Some(prev) = seen.get(ident.name.as_str()) {
            errors.push(
                Diagnostic::error(format!(
                    "`{}` is declared twice in the signature of `{fname}`",
                    ident.name
                ))
                .at(ident.span, format!("duplicate {kind} name"))
                .with_label(*prev, "first declared here"),
            );
        } else {
            seen.insert(&ident.name, ident.span);
        }
    }
    // Rule 7: tensor parameters first.
    let mut first_attr: Option<&super::syntax::ast::Param> = None;
    for p in &def.params {
        let is_tensor = spec_is_tensor(&p.ty);
        if is_tensor {
            if let Some(a) = first_attr {
                errors.push(
                    Diagnostic::error(format!(
                        "tensor parameter `{}` of `{fname}` comes after attribute parameter `{}`",
                        p.name.name, a.name.name
                    ))
                    .at(p.ty.span(), "expected an attribute type here")
                    .with_label(a.span, "first attribute parameter")
                    .with_note(
                        "NNEF requires all tensor parameters before the attribute parameters",
                    ),
                );
            }
        } else if first_attr.is_none() {
            first_attr = Some(p);
        }
    }
    // Rule 8: results all tensors or all attributes.
    if let Some(first) = def.results.first() {
        let kind = spec_is_tensor(&first.ty);
        for r in &def.results[1..] {
            if spec_is_tensor(&r.ty) != kind {
                errors.push(
                    Diagnostic::error(format!("results of `{fname}` mix tensors and attributes"))
                        .at(
                            r.ty.span(),
                            format!(
                                "expected a{} type",
                                if kind { " tensor" } else { "n attribute" }
                            ),
                        )
                        .with_label(first.ty.span(), "the first result sets the kind"),
                );
            }
        }
    }
    // Rule 9: `?` used ⇔ declared generic.
    let uses = def.params.iter().any(|p| spec_uses_generic(&p.ty))
        || def.results.iter().any(|r| spec_uses_generic(&r.ty));
    match (&def.generic, uses) {
        (None, true) => {
            let at = def
                .params
                .iter()
                .map(|p| &p.ty)
                .chain(def.results.iter().map(|r| &r.ty))
                .find(|t| spec_uses_generic(t))
                .map(TypeSpec::span)
                .unwrap_or(def.name.span);
            errors.push(
                Diagnostic::error(format!("`{fname}` uses the generic type `?` but is not declared generic"))
                    .at(at, "`?` used here")
                    .with_note(format!("declare it as `fragment {fname}<?>(...)` or `fragment {fname}<? = scalar>(...)`")),
            );
        }
        (Some(_), false) => errors.push(
            Diagnostic::error(format!("`{fname}` is declared generic but never uses `?`"))
                .at(def.name.span, "declared generic here")
                .with_note("remove the `<?>` or use `?` in a parameter or result type"),
        ),
        _ => {}
    }
    // Rule 10: `tensor<>` only for parameters; `tensor<string>` is meaningless.
    for r in &def.results {
        if spec_has_unbound_tensor(&r.ty) {
            errors.push(
                Diagnostic::error(format!(
                    "result `{}` of `{fname}` has the unbound type `tensor<>`",
                    r.name.name
                ))
                .at(
                    r.ty.span(),
                    "expected a tensor type with a data type, e.g. `tensor<scalar>` or `tensor<?>`",
                ),
            );
        }
    }
    for ty in def
        .params
        .iter()
        .map(|p| &p.ty)
        .chain(def.results.iter().map(|r| &r.ty))
    {
        if let Some(span) = string_tensor(ty) {
            errors.push(
                Diagnostic::error("`tensor<string>` is not a valid type")
                    .at(span, "expected `tensor<scalar>`, `tensor<integer>`, `tensor<logical>` or `tensor<?>`"),
            );
        }
    }
    // Rule 11: default values are literals castable to the parameter type.
    for p in &def.params {
        let Some(default) = &p.default else { continue };
        match literal_kind(default) {
            None => errors.push(
                Diagnostic::error(format!(
                    "default value of `{}` in `{fname}` is not a literal",
                    p.name.name
                ))
                .at(
                    default.span,
                    "expected a literal, e.g. `0.0`, `[]`, `'constant'` or `[(0, 0)]`",
                ),
            ),
            Some(kind) => {
                if !literal_fits(&kind, &p.ty) {
                    errors.push(
                        Diagnostic::error(format!(
                            "default value of `{}` in `{fname}` does not fit its type `{}`",
                            p.name.name,
                            describe_spec(&p.ty, None)
                        ))
                        .at(
                            default.span,
                            format!("expected a value of type `{}`", describe_spec(&p.ty, None)),
                        ),
                    );
                }
            }
        }
    }
    // Rule 13: no external / variable / update inside user fragment bodies.
    if origin == Origin::User
        && let Some(body) = &def.body
    {
        for a in body {
            find_forbidden(&a.rhs, fname, errors);
        }
    }
}

fn string_tensor(ty: &TypeSpec) -> Option<Span> {
    match ty {
        TypeSpec::Tensor(Some(inner), s) => match **inner {
            TypeSpec::Prim(super::syntax::ast::PrimType::String, _) => Some(*s),
            _ => string_tensor(inner),
        },
        TypeSpec::Array(inner, _) => string_tensor(inner),
        TypeSpec::Tuple(items, _) => items.iter().find_map(string_tensor),
        _ => None,
    }
}

/// The shape of a literal expression, for checking defaults without evaluating.
#[derive(Debug)]
enum LitKind {
    Prim(super::syntax::ast::PrimType),
    Array(Vec<LitKind>),
    Tuple(Vec<LitKind>),
}

fn literal_kind(e: &Expr) -> Option<LitKind> {
    use super::syntax::ast::PrimType as P;
    Some(match &e.kind {
        ExprKind::Literal(Literal::Integer(_)) => LitKind::Prim(P::Integer),
        ExprKind::Literal(Literal::Scalar(_)) => LitKind::Prim(P::Scalar),
        ExprKind::Literal(Literal::Logical(_)) => LitKind::Prim(P::Logical),
        ExprKind::Literal(Literal::String(_)) => LitKind::Prim(P::String),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match &operand.kind {
            ExprKind::Literal(Literal::Integer(_)) => LitKind::Prim(P::Integer),
            ExprKind::Literal(Literal::Scalar(_)) => LitKind::Prim(P::Scalar),
            _ => return None,
        },
        ExprKind::Array(items) => {
            LitKind::Array(items.iter().map(literal_kind).collect::<Option<_>>()?)
        }
        ExprKind::Tuple(items) => {
            LitKind::Tuple(items.iter().map(literal_kind).collect::<Option<_>>()?)
        }
        _ => return None,
    })
}

fn literal_fits(k: &LitKind, ty: &TypeSpec) -> bool {
    match (k, ty) {
        (LitKind::Prim(p), TypeSpec::Prim(q, _)) => p == q,
        (LitKind::Prim(_), TypeSpec::Generic(_)) => true,
        // A primitive literal becomes a rank-0 tensor (e.g. `bias: tensor<scalar> = 0.0`).
        (LitKind::Prim(p), TypeSpec::Tensor(Some(inner), _)) => match &**inner {
            TypeSpec::Prim(q, _) => p == q,
            TypeSpec::Generic(_) => true,
            _ => false,
        },
        (LitKind::Prim(_), TypeSpec::Tensor(None, _)) => true,
        (LitKind::Array(items), TypeSpec::Array(inner, _)) => {
            items.iter().all(|i| literal_fits(i, inner))
        }
        (LitKind::Tuple(items), TypeSpec::Tuple(tys, _)) => {
            items.len() == tys.len() && items.iter().zip(tys).all(|(i, t)| literal_fits(i, t))
        }
        _ => false,
    }
}

const FORBIDDEN_IN_FRAGMENTS: [&str; 3] = ["external", "variable", "update"];

fn find_forbidden(e: &Expr, fname: &str, errors: &mut Vec<Diagnostic>) {
    visit(e, &mut |e| {
        if let ExprKind::Invocation { name, .. } = &e.kind
            && FORBIDDEN_IN_FRAGMENTS.contains(&name.name.as_str())
        {
            errors.push(
                Diagnostic::error(format!(
                    "`{}` cannot be used inside fragment `{fname}`",
                    name.name
                ))
                .at(name.span, "not allowed in a fragment body")
                .with_note("`external`, `variable` and `update` may only appear in the graph body"),
            );
        }
    });
}

/// Calls `f` on `e` and every sub-expression.
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Literal(_) | ExprKind::Ident(_) => {}
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter().for_each(|i| visit(i, f)),
        ExprKind::Invocation { args, .. } => args.iter().for_each(|a| visit(&a.value, f)),
        ExprKind::Builtin { arg, .. } => visit(arg, f),
        ExprKind::Unary { operand, .. } => visit(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            visit(lhs, f);
            visit(rhs, f);
        }
        ExprKind::IfElse {
            cond,
            then,
            otherwise,
        } => {
            visit(cond, f);
            visit(then, f);
            visit(otherwise, f);
        }
        ExprKind::Subscript { base, index } => {
            visit(base, f);
            match &**index {
                Index::Single(i) => visit(i, f),
                Index::Range(a, b) => {
                    if let Some(a) = a {
                        visit(a, f);
                    }
                    if let Some(b) = b {
                        visit(b, f);
                    }
                }
            }
        }
        ExprKind::Comprehension {
            iters,
            filter,
            body,
        } => {
            iters.iter().for_each(|(_, e)| visit(e, f));
            if let Some(c) = filter {
                visit(c, f);
            }
            visit(body, f);
        }
    }
}

/// Reads the extension statements and enforces spec §8.1 rules 2–3 on the user document.
pub fn check_features(doc: &Document) -> Result<Features, Diagnostics> {
    let mut feats = Features::default();
    let mut errors = Vec::new();
    // Rule 1: every 1.0.x revision writes `version 1.0;`.
    if let Some(v) = &doc.version
        && (v.major, v.minor) > (1, 0)
    {
        errors.push(
            Diagnostic::error(format!("unsupported NNEF version {}.{}", v.major, v.minor))
                .at(v.span, "expected `1.0`")
                .with_note(
                    "nnefc reads NNEF 1.0 (revisions 1.0.0 to 1.0.5 all write `version 1.0;`)",
                ),
        );
    }
    for ext in &doc.extensions {
        for name in &ext.names {
            match name.name.as_str() {
                EXT_FRAGMENTS => feats.fragments = true,
                EXT_OPERATORS => feats.operators = true,
                other => errors.push(
                    Diagnostic::error(format!("unknown extension `{other}`"))
                        .at(name.span, "nnefc cannot handle this extension")
                        .with_note(format!(
                            "supported extensions: {EXT_FRAGMENTS}, {EXT_OPERATORS}"
                        )),
                ),
            }
        }
    }
    if !feats.fragments
        && let Some(first) = doc.fragments.first()
    {
        errors.push(
            Diagnostic::error("fragment definitions need an extension")
                .at(first.name.span, "fragment defined here")
                .with_note(format!(
                    "add `extension {EXT_FRAGMENTS};` after the version statement"
                )),
        );
    }
    if !feats.operators {
        let bodies = doc
            .graph
            .iter()
            .map(|g| &g.body)
            .chain(doc.fragments.iter().filter_map(|f| f.body.as_ref()));
        'outer: for body in bodies {
            for a in body {
                if let Some(d) = flat_violation(&a.rhs) {
                    errors.push(d);
                    // One report per document is enough: the fix is the same everywhere.
                    break 'outer;
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(feats)
    } else {
        Err(Diagnostics(errors))
    }
}

/// Flat syntax: the right-hand side is an invocation whose arguments are literals,
/// identifiers, negative numbers, invocations, or arrays/tuples of those.
fn flat_violation(e: &Expr) -> Option<Diagnostic> {
    let bad = |what: &str, span: Span| {
        Some(
            Diagnostic::error(format!("{what} needs the operator-expression extension"))
                .at(span, "not allowed in flat NNEF")
                .with_note(format!(
                    "add `extension {EXT_OPERATORS};` after the version statement, or assign each operation to its own identifier"
                )),
        )
    };
    match &e.kind {
        // Nested invocations (`add(x, mul(x, 2.0))`) are not flat syntax in the spec's
        // grammar, but the Khronos parser accepts them without the extension and
        // exporters write them, so they are accepted at any depth.
        ExprKind::Invocation { args, .. } => args.iter().find_map(|a| flat_violation(&a.value)),
        ExprKind::Literal(_) | ExprKind::Ident(_) => None,
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } if matches!(
            operand.kind,
            ExprKind::Literal(Literal::Integer(_) | Literal::Scalar(_))
        ) =>
        {
            None
        }
        ExprKind::Array(items) | ExprKind::Tuple(items) => items.iter().find_map(flat_violation),
        ExprKind::Builtin { .. } => bad("a builtin function", e.span),
        ExprKind::Unary { .. } | ExprKind::Binary { .. } => bad("an operator expression", e.span),
        ExprKind::IfElse { .. } => bad("an `if`/`else` expression", e.span),
        ExprKind::Subscript { .. } => bad("a subscript", e.span),
        ExprKind::Comprehension { .. } => bad("a comprehension", e.span),
    }
}
