//! The compile-time evaluator: NNEF expressions → [`Value`]s.
//!
//! One evaluator serves the graph body and every expanded fragment body. Attribute
//! expressions (arithmetic, comparisons, logic, `if`/`else` with lazy branches,
//! comprehensions with lock-step iterators — names or tuple patterns — and `if`
//! filters, subscripts and ranges, `length_of`, `range_of`, `shape_of`, the conversion
//! builtins, string and array `+` and `*`) are computed here. Operators with a tensor operand become invocations of
//! the matching primitive (`a + b` → `add(a, b)`), handled by `expand`. Binding of
//! invocation arguments lives in `expand`, type conversions in `typeck`, the mapping
//! to IR ops in `lower`.

use super::FrontOptions;
use super::index::FragmentTable;
use super::quant::QuantEntry;
use super::quantize::VarData;
use super::syntax::ast::{
    BinaryOp, Builtin, Expr, ExprKind, Ident, Index, IterPattern, Literal, PrimType, UnaryOp,
};
use super::value::{Value, prim_of_dtype, render_scalar};
use crate::diag::{Diagnostic, Span};
use crate::ir::{Graph, ValueId};
use std::collections::HashMap;

/// Identifiers visible in one graph or fragment body.
pub struct Scope {
    pub vars: HashMap<String, (Value, Span)>,
    /// Binding of `?` inside a generic fragment.
    pub generic: Option<PrimType>,
    /// `true` in the graph body, `false` inside fragments.
    pub in_graph: bool,
}

impl Scope {
    pub fn new(in_graph: bool, generic: Option<PrimType>) -> Scope {
        Scope {
            vars: HashMap::new(),
            generic,
            in_graph,
        }
    }
}

/// One active fragment expansion, for diagnostics and the recursion limit.
#[derive(Clone, Debug)]
pub struct CallFrame {
    pub fragment: String,
    pub call_span: Span,
}

pub type EResult<T> = Result<T, Diagnostic>;

/// Builds the IR graph while evaluating. See the module doc.
pub struct Evaluator<'a> {
    pub table: &'a FragmentTable,
    pub graph: Graph,
    pub warnings: Vec<Diagnostic>,
    pub opts: &'a FrontOptions,
    pub variables: &'a dyn Fn(&str) -> VarData,
    pub stack: Vec<CallFrame>,
    /// Name of the graph input the current `external` invocation defines.
    pub external_name: Option<String>,
    /// Variables by label, so shared weights become one constant.
    pub labels: HashMap<String, (ValueId, Vec<usize>)>,
    /// Every identifier the graph body assigns, for "used before assignment" messages.
    pub graph_lhs: HashMap<String, Span>,
    /// The single identifier the current graph statement assigns (names variables for
    /// `graph.quant` lookups).
    pub current_ident: Option<String>,
    /// `graph.quant` entries by tensor identifier.
    pub quant: HashMap<String, QuantEntry>,
    /// Fragment bodies expanded so far (bounded by `FrontOptions::max_nodes`).
    pub expansions: usize,
    /// Per IR node, the graph statement it came from (the outermost call of the
    /// invocation chain; `None` for the copies of aliased outputs): where diagnostics
    /// about a node of the lowered graph point.
    pub node_spans: Vec<Option<Span>>,
    /// Address of a local of the function that created the evaluator: the stack depth
    /// of [`Evaluator::eval`] is measured from here (see [`STACK_BUDGET`]).
    stack_base: usize,
}

/// How much of the front end's stack (`FRONT_STACK_BYTES`) evaluation may use. The
/// nesting and recursion limits each fit on their own, but a fragment whose recursive
/// call sits deep inside a long expression multiplies the two; this bound is checked on
/// every [`Evaluator::eval`] and turns that case into a diagnostic. The rest of the
/// stack is left for what runs below the deepest `eval` (lowering, shape inference,
/// diagnostics, walks of values at most [`super::syntax::MAX_NESTING`] deep).
pub const STACK_BUDGET: usize = super::FRONT_STACK_BYTES - (64 << 20);

/// The address of a local: a position on the current thread's stack.
#[inline(always)]
fn stack_position() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

impl<'a> Evaluator<'a> {
    pub fn new(
        table: &'a FragmentTable,
        graph_name: &str,
        opts: &'a FrontOptions,
        variables: &'a dyn Fn(&str) -> VarData,
    ) -> Evaluator<'a> {
        Evaluator {
            table,
            graph: Graph::new(graph_name),
            warnings: Vec::new(),
            opts,
            variables,
            stack: Vec::new(),
            external_name: None,
            labels: HashMap::new(),
            graph_lhs: HashMap::new(),
            current_ident: None,
            quant: HashMap::new(),
            expansions: 0,
            node_spans: Vec::new(),
            stack_base: stack_position(),
        }
    }

    pub fn describe(&self, v: &Value) -> String {
        v.describe(&self.graph)
    }

    pub fn eval(&mut self, e: &Expr, scope: &mut Scope) -> EResult<Value> {
        if stack_position().abs_diff(self.stack_base) > STACK_BUDGET {
            return Err(Diagnostic::error(
                "the document nests too deeply: expressions inside recursive fragment calls exceed the front end's stack",
            )
            .at(e.span, "evaluation stopped here")
            .with_note(format!(
                "{} fragment calls are active; the stack allows {} MiB",
                self.stack.len(),
                STACK_BUDGET >> 20
            )));
        }
        match &e.kind {
            ExprKind::Literal(l) => Ok(match l {
                Literal::Integer(i) => Value::Integer(*i),
                Literal::Scalar(s) => Value::Scalar(*s),
                Literal::Logical(b) => Value::Logical(*b),
                Literal::String(s) => Value::Str(s.clone()),
            }),
            ExprKind::Ident(name) => match scope.vars.get(name) {
                Some((v, _)) => Ok(v.clone()),
                None => Err(self.undeclared(name, e.span, scope)),
            },
            ExprKind::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(i, scope)?);
                }
                self.check_homogeneous(&out, items)?;
                Ok(Value::Array(out))
            }
            ExprKind::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(i, scope)?);
                }
                Ok(Value::Tuple(out))
            }
            ExprKind::Invocation {
                name,
                generic,
                args,
            } => self.invoke_ast(name, generic.as_ref(), args, e.span, scope),
            ExprKind::Builtin { func, arg } => {
                let v = self.eval(arg, scope)?;
                self.builtin(*func, v, e.span, arg.span)
            }
            ExprKind::Unary { op, operand } => {
                let v = self.eval(operand, scope)?;
                self.unary(*op, v, e.span, operand.span)
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, e.span, scope),
            ExprKind::IfElse {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval(cond, scope)?;
                match c {
                    // Only the chosen branch is evaluated: recursion (add_n) relies on it.
                    Value::Logical(true) => self.eval(then, scope),
                    Value::Logical(false) => self.eval(otherwise, scope),
                    other => Err(Diagnostic::error("the condition of `if`/`else` must be a logical attribute")
                        .at(cond.span, format!("expected `logical`, found `{}`", self.describe(&other)))
                        .with_note(if other.is_tensor() {
                            "to choose between tensors element by element, use `select(condition, a, b)`"
                        } else {
                            "compare explicitly, e.g. `n > 0`"
                        })),
                }
            }
            ExprKind::Subscript { base, index } => {
                let b = self.eval(base, scope)?;
                self.subscript(b, index, base.span, e.span, scope)
            }
            ExprKind::Comprehension {
                iters,
                filter,
                body,
            } => self.comprehension(iters, filter.as_deref(), body, scope),
        }
    }

    fn undeclared(&self, name: &str, span: Span, scope: &Scope) -> Diagnostic {
        let mut d = Diagnostic::error(format!("undeclared identifier `{name}`"))
            .at(span, "not assigned before this use");
        if scope.in_graph
            && let Some(later) = self.graph_lhs.get(name)
        {
            return Diagnostic::error(format!("`{name}` is used before it is assigned"))
                .at(span, "used here")
                .with_label(*later, "assigned later here")
                .with_note("NNEF assignments must come in dependency order: move this statement after the assignment");
        }
        let close = scope
            .vars
            .keys()
            .filter(|k| name.len() >= 2 && edit_close(k, name))
            .min();
        if let Some(k) = close {
            d = d.with_note(format!("did you mean `{k}`?"));
        } else if self.table.get(name).is_some() {
            d = d.with_note(format!(
                "`{name}` is an operation: call it, e.g. `{name}(...)`"
            ));
        } else {
            d = d.with_note("identifiers must be assigned (`name = ...;`) before they are used");
        }
        d
    }

    /// Array literal items must share a type (spec §2.3); `[]` fits everything.
    fn check_homogeneous(&self, items: &[Value], exprs: &[Expr]) -> EResult<()> {
        let Some(first) = items.first() else {
            return Ok(());
        };
        for (v, e) in items.iter().zip(exprs).skip(1) {
            if !same_kind(first, v, &self.graph) {
                return Err(Diagnostic::error("array items have different types")
                    .at(
                        e.span,
                        format!(
                            "expected `{}`, found `{}`",
                            self.describe(first),
                            self.describe(v)
                        ),
                    )
                    .with_label(exprs[0].span, "the first item sets the type"));
            }
        }
        Ok(())
    }

    fn builtin(&mut self, func: Builtin, v: Value, span: Span, arg_span: Span) -> EResult<Value> {
        let wrong = |this: &Self, what: &str, v: &Value| {
            Diagnostic::error(format!("`{}` takes {what}", builtin_name(func))).at(
                arg_span,
                format!("expected {what}, found `{}`", this.describe(v)),
            )
        };
        match func {
            Builtin::LengthOf => match &v {
                Value::Array(a) => Ok(Value::Integer(a.len() as i64)),
                Value::Str(s) => Ok(Value::Integer(s.chars().count() as i64)),
                _ => Err(wrong(self, "an array or a string", &v)),
            },
            Builtin::RangeOf => {
                let n = match &v {
                    Value::Array(a) => a.len(),
                    Value::Str(s) => s.chars().count(),
                    _ => return Err(wrong(self, "an array or a string", &v)),
                };
                Ok(Value::Array((0..n as i64).map(Value::Integer).collect()))
            }
            Builtin::ShapeOf => {
                self.warnings.push(
                    Diagnostic::warning("`shape_of` is deprecated since NNEF 1.0.1")
                        .at(span, "computed from the inferred shape")
                        .with_note("other NNEF tools reject it; pass shapes as attributes instead"),
                );
                match &v {
                    Value::Tensor(id) => {
                        let ty = self.graph.ty(*id).clone();
                        match ty.shape() {
                            Some(s) => Ok(Value::Array(
                                s.into_iter().map(|d| Value::Integer(d as i64)).collect(),
                            )),
                            None => Err(Diagnostic::error("`shape_of` needs a fully known shape")
                                .at(arg_span, format!("this tensor has type `{ty}`"))
                                .with_note(
                                    "give the graph input a concrete shape (input shape overrides)",
                                )),
                        }
                    }
                    Value::Array(_) | Value::Tuple(_) => Err(wrong(self, "a tensor", &v)),
                    _ => Ok(Value::Array(vec![])),
                }
            }
            Builtin::Cast(to) => {
                if v.contains_tensor() || matches!(v, Value::Array(_) | Value::Tuple(_)) {
                    let mut d = wrong(self, "a single integer, scalar, logical or string", &v);
                    if v.is_tensor() {
                        d = d.with_note(format!(
                            "to convert a tensor, use `cast<{}>(x)`",
                            super::value::prim_name(to)
                        ));
                    }
                    return Err(d);
                }
                convert(&v, to).ok_or_else(|| {
                    Diagnostic::error(format!(
                        "cannot convert {} to `{}`",
                        quote(&v),
                        super::value::prim_name(to)
                    ))
                    .at(arg_span, "this value has no numeric reading")
                })
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, v: Value, span: Span, operand_span: Span) -> EResult<Value> {
        if v.is_tensor() {
            let name = match op {
                UnaryOp::Neg => "neg",
                UnaryOp::Plus => "copy",
                UnaryOp::Not => "not",
            };
            return self.invoke_operator(name, vec![(v, operand_span)], span);
        }
        match (op, &v) {
            (UnaryOp::Neg, Value::Integer(i)) => i
                .checked_neg()
                .map(Value::Integer)
                .ok_or_else(|| overflow(span)),
            (UnaryOp::Neg, Value::Scalar(s)) => Ok(Value::Scalar(-s)),
            (UnaryOp::Plus, Value::Integer(_) | Value::Scalar(_)) => Ok(v),
            (UnaryOp::Not, Value::Logical(b)) => Ok(Value::Logical(!b)),
            _ => {
                let (sym, want) = match op {
                    UnaryOp::Neg => ("-", "an integer, a scalar or a tensor"),
                    UnaryOp::Plus => ("+", "an integer, a scalar or a tensor"),
                    UnaryOp::Not => ("!", "a logical or a tensor"),
                };
                Err(
                    Diagnostic::error(format!("invalid operand for unary `{sym}`")).at(
                        operand_span,
                        format!("expected {want}, found `{}`", self.describe(&v)),
                    ),
                )
            }
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
        scope: &mut Scope,
    ) -> EResult<Value> {
        let a = self.eval(lhs, scope)?;
        // `&&` and `||` short-circuit on attributes.
        match (op, &a) {
            (BinaryOp::And, Value::Logical(false)) => return Ok(Value::Logical(false)),
            (BinaryOp::Or, Value::Logical(true)) => return Ok(Value::Logical(true)),
            _ => {}
        }
        let b = self.eval(rhs, scope)?;
        if a.is_tensor() || b.is_tensor() {
            let name = match op {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::Div => "div",
                BinaryOp::Pow => "pow",
                BinaryOp::Lt => "lt",
                BinaryOp::Gt => "gt",
                BinaryOp::Le => "le",
                BinaryOp::Ge => "ge",
                BinaryOp::Eq => "eq",
                BinaryOp::Ne => "ne",
                BinaryOp::And => "and",
                BinaryOp::Or => "or",
                BinaryOp::In => {
                    return Err(Diagnostic::error("`in` works on attributes only")
                        .at(span, "a tensor operand here")
                        .with_note("`x in [a, b]` tests membership in a compile-time array"));
                }
            };
            return self.invoke_operator(name, vec![(a, lhs.span), (b, rhs.span)], span);
        }
        self.attr_binary(op, a, b, lhs.span, rhs.span, span)
    }

    fn attr_binary(
        &self,
        op: BinaryOp,
        a: Value,
        b: Value,
        ls: Span,
        rs: Span,
        span: Span,
    ) -> EResult<Value> {
        use Value::*;
        let bad = |this: &Self, a: &Value, b: &Value| {
            Diagnostic::error(format!("invalid operand types for `{}`", op_symbol(op)))
                .at(
                    span,
                    format!(
                        "`{}` {} `{}`",
                        this.describe(a),
                        op_symbol(op),
                        this.describe(b)
                    ),
                )
                .with_note(operand_hint(op, a, b))
        };
        Ok(match (op, &a, &b) {
            (BinaryOp::Add, Integer(x), Integer(y)) => {
                Integer(x.checked_add(*y).ok_or_else(|| overflow(span))?)
            }
            (BinaryOp::Sub, Integer(x), Integer(y)) => {
                Integer(x.checked_sub(*y).ok_or_else(|| overflow(span))?)
            }
            (BinaryOp::Mul, Integer(x), Integer(y)) => {
                Integer(x.checked_mul(*y).ok_or_else(|| overflow(span))?)
            }
            (BinaryOp::Div, Integer(x), Integer(y)) => {
                if *y == 0 {
                    return Err(
                        Diagnostic::error("integer division by zero").at(rs, "this divisor is 0")
                    );
                }
                // C semantics: truncation toward zero.
                Integer(x.checked_div(*y).ok_or_else(|| overflow(span))?)
            }
            (BinaryOp::Pow, Integer(x), Integer(y)) => {
                let e = u32::try_from(*y).map_err(|_| {
                    Diagnostic::error("negative exponent in integer power")
                        .at(rs, format!("exponent {y} is negative"))
                        .with_note("use scalars for fractional results, e.g. `2.0 ^ -1.0`")
                })?;
                Integer(x.checked_pow(e).ok_or_else(|| overflow(span))?)
            }
            (BinaryOp::Add, Scalar(x), Scalar(y)) => Scalar(x + y),
            (BinaryOp::Sub, Scalar(x), Scalar(y)) => Scalar(x - y),
            (BinaryOp::Mul, Scalar(x), Scalar(y)) => Scalar(x * y),
            (BinaryOp::Div, Scalar(x), Scalar(y)) => Scalar(x / y),
            (BinaryOp::Pow, Scalar(x), Scalar(y)) => Scalar(x.powf(*y)),
            (BinaryOp::Add, Str(x), Str(y)) => Str(format!("{x}{y}")),
            (BinaryOp::Add, Array(x), Array(y)) => {
                if let (Some(p), Some(q)) = (x.first(), y.first())
                    && !same_kind(p, q, &self.graph)
                {
                    return Err(bad(self, &a, &b));
                }
                Array(x.iter().chain(y).cloned().collect())
            }
            (BinaryOp::Mul, Str(s), Integer(n)) | (BinaryOp::Mul, Integer(n), Str(s)) => {
                let span = if matches!(a, Str(_)) { rs } else { ls };
                let k = repeat_count(*n, span)?;
                check_len(s.len().saturating_mul(k), span)?;
                Str(s.repeat(k))
            }
            (BinaryOp::Mul, Array(x), Integer(n)) | (BinaryOp::Mul, Integer(n), Array(x)) => {
                let span = if matches!(a, Array(_)) { rs } else { ls };
                let k = repeat_count(*n, span)?;
                check_len(x.len().saturating_mul(k), span)?;
                let mut out = Vec::with_capacity(x.len() * k);
                for _ in 0..k {
                    out.extend(x.iter().cloned());
                }
                Array(out)
            }
            (BinaryOp::Lt | BinaryOp::Gt | BinaryOp::Le | BinaryOp::Ge, _, _) => {
                let ord = match (&a, &b) {
                    (Integer(x), Integer(y)) => x.partial_cmp(y),
                    (Scalar(x), Scalar(y)) => x.partial_cmp(y),
                    (Str(x), Str(y)) => x.partial_cmp(y),
                    _ => return Err(bad(self, &a, &b)),
                };
                let Some(ord) = ord else {
                    return Ok(Logical(false));
                };
                Logical(match op {
                    BinaryOp::Lt => ord.is_lt(),
                    BinaryOp::Gt => ord.is_gt(),
                    BinaryOp::Le => ord.is_le(),
                    _ => ord.is_ge(),
                })
            }
            (BinaryOp::Eq | BinaryOp::Ne, _, _) => {
                if !same_kind(&a, &b, &self.graph) && !matches!((&a, &b), (Array(_), Array(_))) {
                    return Err(bad(self, &a, &b));
                }
                let eq = a == b;
                Logical(if op == BinaryOp::Eq { eq } else { !eq })
            }
            (BinaryOp::And, Logical(x), Logical(y)) => Logical(*x && *y),
            (BinaryOp::Or, Logical(x), Logical(y)) => Logical(*x || *y),
            (BinaryOp::In, _, Array(items)) => Logical(items.contains(&a)),
            _ => return Err(bad(self, &a, &b)),
        })
    }

    fn subscript(
        &mut self,
        base: Value,
        index: &Index,
        base_span: Span,
        span: Span,
        scope: &mut Scope,
    ) -> EResult<Value> {
        let len = match &base {
            Value::Array(a) | Value::Tuple(a) => a.len(),
            Value::Str(s) => s.chars().count(),
            other => {
                let mut d = Diagnostic::error("only arrays, tuples and strings can be subscripted")
                    .at(
                        base_span,
                        format!(
                            "expected an array, tuple or string, found `{}`",
                            self.describe(other)
                        ),
                    );
                if other.is_tensor() {
                    d = d.with_note("to take part of a tensor, use `slice(x, axes = ..., begin = ..., end = ...)`");
                }
                return Err(d);
            }
        };
        match index {
            Index::Single(ie) => {
                if matches!(base, Value::Tuple(_))
                    && !matches!(ie.kind, ExprKind::Literal(Literal::Integer(_)))
                {
                    return Err(Diagnostic::error(
                        "tuples can only be indexed with an integer literal",
                    )
                    .at(ie.span, "expected an integer literal such as `0`"));
                }
                let i = self.eval_int(ie, scope, "index")?;
                let k = normalize_index(i, len).ok_or_else(|| {
                    Diagnostic::error(format!("index {i} is out of range"))
                        .at(
                            ie.span,
                            format!("expected an index in [{}, {len})", -(len as i64)),
                        )
                        .with_label(base_span, format!("this has length {len}"))
                })?;
                Ok(match base {
                    Value::Array(mut a) | Value::Tuple(mut a) => a.swap_remove(k),
                    Value::Str(s) => {
                        Value::Str(s.chars().nth(k).map(String::from).unwrap_or_default())
                    }
                    _ => Value::Array(vec![]),
                })
            }
            Index::Range(lo, hi) => {
                if matches!(base, Value::Tuple(_)) {
                    return Err(Diagnostic::error("tuples cannot be sliced with a range")
                        .at(span, "expected a single index"));
                }
                let bound =
                    |this: &mut Self,
                     e: &Option<Expr>,
                     default: usize,
                     scope: &mut Scope|
                     -> EResult<usize> {
                        match e {
                            None => Ok(default),
                            Some(e) => {
                                let i = this.eval_int(e, scope, "range bound")?;
                                let k = if i < 0 { i + len as i64 } else { i };
                                if (0..=len as i64).contains(&k) {
                                    Ok(k as usize)
                                } else {
                                    Err(Diagnostic::error(format!(
                                        "range bound {i} is out of range"
                                    ))
                                    .at(
                                        e.span,
                                        format!("expected a bound in [{}, {len}]", -(len as i64)),
                                    )
                                    .with_label(base_span, format!("this has length {len}")))
                                }
                            }
                        }
                    };
                let a = bound(self, lo, 0, scope)?;
                let b = bound(self, hi, len, scope)?;
                if a > b {
                    return Err(Diagnostic::error(format!("range [{a}:{b}] is reversed"))
                        .at(span, "expected begin ≤ end"));
                }
                Ok(match base {
                    Value::Array(v) => Value::Array(v[a..b].to_vec()),
                    Value::Str(s) => Value::Str(s.chars().skip(a).take(b - a).collect()),
                    other => other,
                })
            }
        }
    }

    /// Evaluates an expression that must be an integer attribute.
    pub fn eval_int(&mut self, e: &Expr, scope: &mut Scope, what: &str) -> EResult<i64> {
        match self.eval(e, scope)? {
            Value::Integer(i) => Ok(i),
            other => Err(Diagnostic::error(format!("{what} must be an integer")).at(
                e.span,
                format!("expected `integer`, found `{}`", self.describe(&other)),
            )),
        }
    }

    fn comprehension(
        &mut self,
        iters: &[(IterPattern, Expr)],
        filter: Option<&Expr>,
        body: &Expr,
        scope: &mut Scope,
    ) -> EResult<Value> {
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(iters.len());
        for (pattern, e) in iters {
            match self.eval(e, scope)? {
                Value::Array(items) => lists.push(items),
                other => {
                    return Err(Diagnostic::error(format!(
                        "`{}` must iterate over an array",
                        pattern.text()
                    ))
                    .at(
                        e.span,
                        format!("expected an array, found `{}`", self.describe(&other)),
                    )
                    .with_note("use `range_of(x)` to iterate over indices"));
                }
            }
        }
        let n = lists.first().map_or(0, Vec::len);
        for ((pattern, e), l) in iters.iter().zip(&lists).skip(1) {
            if l.len() != n {
                return Err(Diagnostic::error(
                    "iterables of a comprehension have different lengths",
                )
                .at(
                    e.span,
                    format!("`{}` iterates over {} items", pattern.text(), l.len()),
                )
                .with_label(
                    iters[0].1.span,
                    format!("`{}` iterates over {n} items", iters[0].0.text()),
                )
                .with_note(
                    "iterators advance in lock step, so all iterables need the same length",
                ));
            }
        }
        let mut out = Vec::new();
        for k in 0..n {
            let mut bindings = Vec::new();
            for ((pattern, e), l) in iters.iter().zip(&lists) {
                self.destructure(pattern, l[k].clone(), e.span, &mut bindings)?;
            }
            let mut saved = Vec::with_capacity(bindings.len());
            for (ident, v) in bindings {
                let prev = scope.vars.insert(ident.name.clone(), (v, ident.span));
                saved.push((ident.name.clone(), prev));
            }
            let r = self.comprehension_item(filter, body, scope);
            for (name, prev) in saved.into_iter().rev() {
                match prev {
                    Some(p) => scope.vars.insert(name, p),
                    None => scope.vars.remove(&name),
                };
            }
            if let Some(v) = r? {
                out.push(v);
            }
        }
        Ok(Value::Array(out))
    }

    /// Matches one item of an iterable against an iterator pattern: a name takes the
    /// item, a tuple pattern needs a tuple of the same length.
    fn destructure<'p>(
        &self,
        pattern: &'p IterPattern,
        v: Value,
        iterable: Span,
        out: &mut Vec<(&'p Ident, Value)>,
    ) -> EResult<()> {
        match (pattern, v) {
            (IterPattern::Name(ident), v) => {
                if let Some((prev, _)) = out.iter().find(|(i, _)| i.name == ident.name) {
                    return Err(Diagnostic::error(format!(
                        "`{}` is bound twice by the comprehension's iterators",
                        ident.name
                    ))
                    .at(ident.span, "bound again here")
                    .with_label(prev.span, "first bound here"));
                }
                out.push((ident, v));
                Ok(())
            }
            (IterPattern::Tuple(pats, _), Value::Tuple(items)) if pats.len() == items.len() => {
                for (p, i) in pats.iter().zip(items) {
                    self.destructure(p, i, iterable, out)?;
                }
                Ok(())
            }
            (IterPattern::Tuple(pats, span), v) => Err(Diagnostic::error(
                "the iterator pattern does not match the items of the iterable",
            )
            .at(*span, format!("a tuple of {} names", pats.len()))
            .with_label(iterable, format!("an item here is `{}`", self.describe(&v)))),
        }
    }

    fn comprehension_item(
        &mut self,
        filter: Option<&Expr>,
        body: &Expr,
        scope: &mut Scope,
    ) -> EResult<Option<Value>> {
        if let Some(f) = filter {
            match self.eval(f, scope)? {
                Value::Logical(true) => {}
                Value::Logical(false) => return Ok(None),
                other => {
                    return Err(Diagnostic::error(
                        "the filter of a comprehension must be a logical attribute",
                    )
                    .at(
                        f.span,
                        format!("expected `logical`, found `{}`", self.describe(&other)),
                    ));
                }
            }
        }
        self.eval(body, scope).map(Some)
    }
}

fn normalize_index(i: i64, len: usize) -> Option<usize> {
    let k = if i < 0 { i + len as i64 } else { i };
    if (0..len as i64).contains(&k) {
        Some(k as usize)
    } else {
        None
    }
}

/// The most items a compile-time array or string may have. Attribute values are shapes,
/// axes and small tables; a bound keeps a document like `[0] * 1000000000` from exhausting
/// memory at compile time.
pub const MAX_VALUE_LEN: usize = 1 << 24;

fn check_len(len: usize, span: Span) -> EResult<()> {
    if len > MAX_VALUE_LEN {
        return Err(Diagnostic::error(format!(
            "compile-time value too large: {len} items (the limit is {MAX_VALUE_LEN})"
        ))
        .at(span, "this repetition"));
    }
    Ok(())
}

fn repeat_count(n: i64, span: Span) -> EResult<usize> {
    usize::try_from(n).map_err(|_| {
        Diagnostic::error(format!("repeat count {n} is negative"))
            .at(span, "expected an integer ≥ 0")
    })
}

fn overflow(span: Span) -> Diagnostic {
    Diagnostic::error("integer overflow in compile-time arithmetic")
        .at(span, "the result does not fit in 64 bits")
}

fn edit_close(a: &str, b: &str) -> bool {
    a != b && a.len().abs_diff(b.len()) <= 1 && {
        let (mut d, mut i, mut j) = (0, 0, 0);
        let (x, y) = (a.as_bytes(), b.as_bytes());
        while i < x.len() && j < y.len() {
            if x[i] == y[j] {
                i += 1;
                j += 1;
            } else {
                d += 1;
                if x.len() > y.len() {
                    i += 1;
                } else if y.len() > x.len() {
                    j += 1;
                } else {
                    i += 1;
                    j += 1;
                }
            }
        }
        d + (x.len() - i) + (y.len() - j) <= 1
    }
}

/// Same type for homogeneity checks: same variant; tensors of the same dtype; arrays
/// compare their first items (an empty array matches any array).
pub fn same_kind(a: &Value, b: &Value, graph: &Graph) -> bool {
    match (a, b) {
        (Value::Integer(_), Value::Integer(_))
        | (Value::Scalar(_), Value::Scalar(_))
        | (Value::Logical(_), Value::Logical(_))
        | (Value::Str(_), Value::Str(_)) => true,
        (Value::Tensor(x), Value::Tensor(y)) => graph.ty(*x).dtype == graph.ty(*y).dtype,
        (Value::Array(x), Value::Array(y)) => match (x.first(), y.first()) {
            (Some(p), Some(q)) => same_kind(p, q, graph),
            _ => true,
        },
        (Value::Tuple(x), Value::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_kind(p, q, graph))
        }
        _ => false,
    }
}

fn builtin_name(b: Builtin) -> &'static str {
    match b {
        Builtin::LengthOf => "length_of",
        Builtin::RangeOf => "range_of",
        Builtin::ShapeOf => "shape_of",
        Builtin::Cast(p) => super::value::prim_name(p),
    }
}

fn quote(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("'{s}'"),
        other => other.render(),
    }
}

/// The conversion builtins `integer()`, `scalar()`, `logical()`, `string()`.
fn convert(v: &Value, to: PrimType) -> Option<Value> {
    Some(match (to, v) {
        (PrimType::Integer, Value::Integer(i)) => Value::Integer(*i),
        (PrimType::Integer, Value::Scalar(s)) if s.is_finite() => Value::Integer(s.trunc() as i64),
        (PrimType::Integer, Value::Logical(b)) => Value::Integer(*b as i64),
        (PrimType::Integer, Value::Str(s)) => Value::Integer(s.trim().parse().ok()?),
        (PrimType::Scalar, Value::Integer(i)) => Value::Scalar(*i as f64),
        (PrimType::Scalar, Value::Scalar(s)) => Value::Scalar(*s),
        (PrimType::Scalar, Value::Logical(b)) => Value::Scalar(if *b { 1.0 } else { 0.0 }),
        (PrimType::Scalar, Value::Str(s)) => Value::Scalar(s.trim().parse().ok()?),
        (PrimType::Logical, Value::Integer(i)) => Value::Logical(*i != 0),
        (PrimType::Logical, Value::Scalar(s)) => Value::Logical(*s != 0.0),
        (PrimType::Logical, Value::Logical(b)) => Value::Logical(*b),
        (PrimType::Logical, Value::Str(s)) => Value::Logical(!s.is_empty()),
        (PrimType::String, Value::Scalar(s)) => Value::Str(render_scalar(*s)),
        (PrimType::String, other) => Value::Str(other.render()),
        _ => return None,
    })
}

fn op_symbol(op: BinaryOp) -> &'static str {
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

fn operand_hint(op: BinaryOp, a: &Value, b: &Value) -> String {
    let mixed_numbers = matches!(
        (a, b),
        (Value::Integer(_), Value::Scalar(_)) | (Value::Scalar(_), Value::Integer(_))
    );
    if mixed_numbers {
        return "NNEF never mixes integers and scalars: convert one side with `scalar(n)` or `integer(x)`".into();
    }
    match op {
        BinaryOp::And | BinaryOp::Or => "`&&` and `||` take logical operands".into(),
        BinaryOp::In => "`in` tests membership in an array: `x in [a, b]`".into(),
        BinaryOp::Add => "`+` adds numbers of one kind, or concatenates two strings or two arrays".into(),
        BinaryOp::Mul => "`*` multiplies numbers of one kind, or repeats a string or array an integer number of times".into(),
        _ => "both operands must be integers, or both scalars".into(),
    }
}

/// Used by `typeck`/`lower` messages.
pub fn dtype_word(graph: &Graph, id: ValueId) -> &'static str {
    super::value::prim_name(prim_of_dtype(graph.ty(id).dtype))
}
