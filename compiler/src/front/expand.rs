//! Invocations and expansion: binding arguments to a fragment's parameters, binding
//! the generic `?`, then either lowering (primitives and the native set, see `lower`)
//! or inlining the fragment body in a fresh scope. Also drives the graph body
//! (single assignment, `external` only for graph inputs, results).
//!
//! Errors raised inside an expanded body get a secondary label per active call
//! ("in `l2_normalization` called from here"); recursion stops at
//! `FrontOptions::max_recursion_depth` with the call chain in the diagnostic, and the
//! total size at `FrontOptions::max_nodes` fragment calls or IR nodes, naming the
//! fragment that recursed. Graph outputs that alias an input, a constant or another
//! output get a `copy` of their own (outputs are ABI). This module does not know any
//! op's semantics beyond its signature.

use super::eval::{CallFrame, EResult, Evaluator, Scope};
use super::index::Fragment;
use super::lower::is_native;
use super::syntax::ast::{
    Arg, Assignment, Expr, ExprKind, FragmentDef, GraphDef, Ident, PrimType, TypeSpec,
};
use super::value::{Value, describe_spec, prim_name, spec_is_tensor};
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::ir::{Op, UnaryOp, ValueDef, ValueId};
use std::collections::{HashMap, HashSet};

/// One evaluated argument of an invocation.
pub struct ArgVal {
    pub name: Option<Ident>,
    pub value: Value,
    pub span: Span,
}

/// Parameters after binding: name → (value, span of the argument or of the default).
pub struct Bound {
    pub values: HashMap<String, (Value, Span)>,
    pub generic: Option<PrimType>,
    pub call_span: Span,
}

impl<'a> Evaluator<'a> {
    pub fn lookup(&self, name: &Ident) -> EResult<&'a Fragment> {
        let table = self.table;
        table.get(&name.name).ok_or_else(|| {
            let mut d = Diagnostic::error(format!("unknown operation `{}`", name.name)).at(name.span, "not defined");
            if let Some(s) = table.suggest(&name.name) {
                d = d.with_note(format!("did you mean `{s}`?"));
            } else {
                d = d.with_note("operations come from the NNEF standard library or from `fragment` definitions in this document");
            }
            d
        })
    }

    pub fn invoke_ast(
        &mut self,
        name: &Ident,
        generic: Option<&TypeSpec>,
        args: &[Arg],
        span: Span,
        scope: &mut Scope,
    ) -> EResult<Value> {
        let frag = self.lookup(name)?;
        let explicit = match generic {
            None => None,
            Some(TypeSpec::Prim(PrimType::String, s)) => {
                return Err(Diagnostic::error("`string` is not a tensor data type")
                    .at(*s, "expected `scalar`, `integer` or `logical`"));
            }
            Some(TypeSpec::Prim(p, _)) => Some(*p),
            Some(TypeSpec::Generic(s)) => match scope.generic {
                Some(p) => Some(p),
                None => {
                    return Err(Diagnostic::error("`<?>` used outside a generic fragment")
                        .at(*s, "`?` is not bound here")
                        .with_note("write a concrete type such as `<scalar>`"));
                }
            },
            Some(other) => {
                return Err(
                    Diagnostic::error("the generic argument must be a primitive type")
                        .at(other.span(), "expected `scalar`, `integer` or `logical`"),
                );
            }
        };
        if explicit.is_some() && frag.def.generic.is_none() {
            let s = generic.map(TypeSpec::span).unwrap_or(name.span);
            return Err(Diagnostic::error(format!("`{}` is not generic", name.name))
                .at(s, "unexpected type argument")
                .with_label(frag.def.name.span, "declared without `<?>` here"));
        }
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            let v = self.eval(&a.value, scope)?;
            vals.push(ArgVal {
                name: a.name.clone(),
                value: v,
                span: a.value.span,
            });
        }
        self.invoke(frag, explicit, vals, span, name.span)
    }

    /// Operators on tensors: `a + b` is `add(a, b)`.
    pub fn invoke_operator(
        &mut self,
        name: &str,
        args: Vec<(Value, Span)>,
        span: Span,
    ) -> EResult<Value> {
        let ident = Ident {
            name: name.into(),
            span,
        };
        let frag = self.lookup(&ident)?;
        let vals = args
            .into_iter()
            .map(|(value, span)| ArgVal {
                name: None,
                value,
                span,
            })
            .collect();
        self.invoke(frag, None, vals, span, span)
    }

    /// Binds, type-checks, then lowers or expands.
    pub fn invoke(
        &mut self,
        frag: &'a Fragment,
        explicit: Option<PrimType>,
        args: Vec<ArgVal>,
        call_span: Span,
        name_span: Span,
    ) -> EResult<Value> {
        let def = &frag.def;
        let fname = def.name.name.as_str();
        // Positional first, then named (spec §2.4).
        let mut slots: Vec<Option<(Value, Span)>> = vec![None; def.params.len()];
        let mut seen_named: Option<Span> = None;
        let mut positional = 0usize;
        for a in args {
            match &a.name {
                None => {
                    if let Some(named) = seen_named {
                        return Err(Diagnostic::error(
                            "positional argument after a named argument",
                        )
                        .at(a.span, "expected `name = value` here")
                        .with_label(named, "named arguments start here"));
                    }
                    if positional >= def.params.len() {
                        return Err(Diagnostic::error(format!(
                            "too many arguments for `{fname}`: it takes {} parameter{}",
                            def.params.len(),
                            if def.params.len() == 1 { "" } else { "s" }
                        ))
                        .at(a.span, "unexpected argument")
                        .with_note(signature(def)));
                    }
                    // Spec §2.4: tensors may be passed by position, attributes only by
                    // name (the Khronos parser: "expected named argument").
                    let p = &def.params[positional];
                    if !spec_is_tensor(&p.ty) {
                        return Err(Diagnostic::error(format!(
                            "attribute `{}` of `{fname}` must be passed by name",
                            p.name.name
                        ))
                        .at(a.span, format!("write `{} = ...` here", p.name.name))
                        .with_note("NNEF passes tensors by position and attributes by name")
                        .with_note(signature(def)));
                    }
                    slots[positional] = Some((a.value, a.span));
                    positional += 1;
                }
                Some(n) => {
                    seen_named.get_or_insert(n.span);
                    let Some(i) = def.params.iter().position(|p| p.name.name == n.name) else {
                        return Err(Diagnostic::error(format!(
                            "`{fname}` has no parameter `{}`",
                            n.name
                        ))
                        .at(n.span, "unknown parameter name")
                        .with_note(signature(def)));
                    };
                    if slots[i].is_some() {
                        return Err(Diagnostic::error(format!(
                            "parameter `{}` of `{fname}` is given twice",
                            n.name
                        ))
                        .at(n.span, "duplicate argument")
                        .with_note(signature(def)));
                    }
                    slots[i] = Some((a.value, a.span));
                }
            }
        }
        let mut values: Vec<(Value, Span)> = Vec::with_capacity(slots.len());
        for (p, slot) in def.params.iter().zip(slots) {
            match slot {
                Some(v) => values.push(v),
                None => match &p.default {
                    Some(d) => {
                        let mut empty = Scope::new(false, None);
                        let v = self.eval(d, &mut empty)?;
                        values.push((v, call_span));
                    }
                    None => {
                        return Err(Diagnostic::error(format!(
                            "missing argument `{}` of `{fname}`",
                            p.name.name
                        ))
                        .at(
                            call_span,
                            format!(
                                "expected a value for `{}: {}`",
                                p.name.name,
                                describe_spec(&p.ty, None)
                            ),
                        )
                        .with_note(signature(def)));
                    }
                },
            }
        }
        // Bind `?`: explicit, else deduced (must agree), else the declared default.
        let generic = match &def.generic {
            None => None,
            Some(default) => match explicit {
                Some(p) => Some(p),
                None => {
                    let mut cands: Vec<(PrimType, usize)> = Vec::new();
                    for (i, (p, (v, _))) in def.params.iter().zip(&values).enumerate() {
                        let mut out = Vec::new();
                        super::typeck::deduce(v, &p.ty, &self.graph, &mut out);
                        cands.extend(out.into_iter().map(|t| (t, i)));
                    }
                    match cands.first() {
                        Some(&(t, i)) => {
                            if let Some(&(u, j)) = cands.iter().find(|(u, _)| *u != t) {
                                return Err(Diagnostic::error(format!(
                                    "ambiguous generic type in `{fname}`"
                                ))
                                .at(values[j].1, format!("this makes `?` `{}`", prim_name(u)))
                                .with_label(
                                    values[i].1,
                                    format!("this makes `?` `{}`", prim_name(t)),
                                )
                                .with_note(format!(
                                    "write the type explicitly, e.g. `{fname}<{}>(...)`",
                                    prim_name(t)
                                )));
                            }
                            Some(t)
                        }
                        None => match default {
                            Some(TypeSpec::Prim(p, _)) => Some(*p),
                            _ => {
                                return Err(Diagnostic::error(format!(
                                    "cannot deduce the generic type of `{fname}`"
                                ))
                                .at(name_span, "no argument determines `?`")
                                .with_note(format!(
                                    "write it explicitly, e.g. `{fname}<scalar>(...)`"
                                )));
                            }
                        },
                    }
                }
            },
        };
        let mut bound = HashMap::with_capacity(values.len());
        for (p, (v, span)) in def.params.iter().zip(values) {
            let found = self.describe(&v);
            let is_int_for_scalar =
                matches!(v, Value::Integer(_)) && describe_spec(&p.ty, generic).contains("scalar");
            let c = self.coerce(v, &p.ty, generic).map_err(|_| {
                let want = describe_spec(&p.ty, generic);
                let mut d = Diagnostic::error(format!("wrong type for argument `{}` of `{fname}`", p.name.name))
                    .at(span, format!("expected `{want}`, found `{found}`"));
                if is_int_for_scalar {
                    d = d.with_note("NNEF does not convert integers to scalars: write the literal with a decimal point, e.g. `1.0`");
                } else if found.starts_with("tensor") && !want.starts_with("tensor") && !want.contains("tensor") {
                    d = d.with_note(format!("`{}` is an attribute: it must be known at compile time, not a tensor", p.name.name));
                } else if found.starts_with("tensor") && want.starts_with("tensor") {
                    d = d.with_note("tensors are never converted implicitly: use `cast<T>(x)`");
                }
                d
            })?;
            bound.insert(p.name.name.clone(), (c, span));
        }
        let bound = Bound {
            values: bound,
            generic,
            call_span,
        };
        if frag.is_primitive() || is_native(fname) {
            return self.lower_op(frag, &bound);
        }
        self.expand(frag, bound)
    }

    fn expand(&mut self, frag: &'a Fragment, bound: Bound) -> EResult<Value> {
        let def = &frag.def;
        let fname = def.name.name.clone();
        let call_span = bound.call_span;
        self.expansions += 1;
        if self.expansions > self.opts.max_nodes {
            return Err(self.too_large(
                format!("{} fragment calls", self.opts.max_nodes),
                call_span,
                &fname,
            ));
        }
        if self.stack.len() >= self.opts.max_recursion_depth {
            let shown = self.chain_text();
            return Err(Diagnostic::error(format!(
                "fragment expansion deeper than {} calls",
                self.opts.max_recursion_depth
            ))
            .at(
                call_span,
                format!("call to `{fname}` exceeds the depth limit"),
            )
            .with_note(format!("call chain: {shown} → {fname}"))
            .with_note("a recursive fragment needs an `if`/`else` that stops the recursion"));
        }
        let Some(body) = &def.body else {
            return Err(
                Diagnostic::error(format!("`{fname}` has no body")).at(call_span, "cannot expand")
            );
        };
        self.stack.push(CallFrame {
            fragment: fname.clone(),
            call_span,
        });
        let r = self.expand_body(def, body, bound);
        self.stack.pop();
        r.map_err(|d| {
            let label = format!("in `{fname}` called from here");
            if d.secondary
                .iter()
                .any(|l| l.span == call_span && l.message == label)
                || d.primary.as_ref().is_some_and(|p| p.span == call_span)
            {
                d
            } else {
                d.with_label(call_span, label)
            }
        })
    }

    /// The active call chain, `a → b → … → f`, shortened in the middle when long.
    fn chain_text(&self) -> String {
        let chain: Vec<&str> = self.stack.iter().map(|f| f.fragment.as_str()).collect();
        if chain.len() > 8 {
            format!(
                "{} → … → {}",
                chain[..4].join(" → "),
                chain[chain.len() - 3..].join(" → ")
            )
        } else {
            chain.join(" → ")
        }
    }

    /// The expansion grew past a size limit (`what`, e.g. "1048576 operations") while
    /// `current` was being called or lowered at `span`. Points at the graph statement the
    /// expansion started from and names the fragment most often on the call chain: the
    /// one that recursed.
    pub fn too_large(&self, what: String, span: Span, current: &str) -> Diagnostic {
        let Some(top) = self.stack.first() else {
            return Diagnostic::error(format!("the graph has more than {what}"))
                .at(span, "the limit is reached here")
                .with_note("the limit keeps compile time and memory bounded; real models stay far below it");
        };
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for f in self
            .stack
            .iter()
            .map(|f| f.fragment.as_str())
            .chain([current])
        {
            match counts.iter_mut().find(|(n, _)| *n == f) {
                Some((_, c)) => *c += 1,
                None => counts.push((f, 1)),
            }
        }
        // The most frequent; on a tie the innermost (`counts` is in order of first call,
        // and `max_by_key` keeps the last of equal maxima).
        let (culprit, times) = counts
            .iter()
            .copied()
            .max_by_key(|(_, c)| *c)
            .unwrap_or((current, 1));
        Diagnostic::error(format!(
            "expanding `{}` creates more than {what}",
            top.fragment
        ))
        .at(top.call_span, format!("`{}` is called here", top.fragment))
        .with_note(format!(
            "`{culprit}` is on the call chain {times} time{} when the limit is reached: {} → {current}",
            if times == 1 { "" } else { "s" },
            self.chain_text()
        ))
        .with_note("a fragment that calls itself more than once per level grows exponentially with the depth")
    }

    fn expand_body(
        &mut self,
        def: &FragmentDef,
        body: &[Assignment],
        bound: Bound,
    ) -> EResult<Value> {
        let mut scope = Scope::new(false, bound.generic);
        for (name, v) in bound.values {
            scope.vars.insert(name, v);
        }
        for a in body {
            let v = self.eval(&a.rhs, &mut scope)?;
            self.bind_lhs(&a.lhs, v, &mut scope, &mut HashSet::new())?;
        }
        let mut results = Vec::with_capacity(def.results.len());
        for r in &def.results {
            let Some((v, span)) = scope.vars.get(&r.name.name).cloned() else {
                return Err(Diagnostic::error(format!(
                    "result `{}` of `{}` is never assigned",
                    r.name.name, def.name.name
                ))
                .at(r.name.span, "declared here")
                .with_note(format!("assign it in the body: `{} = ...;`", r.name.name)));
            };
            let found = self.describe(&v);
            let c = self.coerce(v, &r.ty, bound.generic).map_err(|_| {
                Diagnostic::error(format!(
                    "result `{}` of `{}` has the wrong type",
                    r.name.name, def.name.name
                ))
                .at(
                    span,
                    format!(
                        "expected `{}`, found `{found}`",
                        describe_spec(&r.ty, bound.generic)
                    ),
                )
                .with_label(r.ty.span(), "declared type")
            })?;
            results.push(c);
        }
        Ok(if results.len() == 1 {
            results.swap_remove(0)
        } else {
            Value::Tuple(results)
        })
    }

    /// Binds a left-hand side pattern (identifier, array or tuple of patterns).
    pub fn bind_lhs(
        &mut self,
        lhs: &Expr,
        v: Value,
        scope: &mut Scope,
        fresh: &mut HashSet<String>,
    ) -> EResult<()> {
        match (&lhs.kind, v) {
            (ExprKind::Ident(name), v) => {
                if let Some((_, prev)) = scope.vars.get(name) {
                    return Err(
                        Diagnostic::error(format!("`{name}` is assigned more than once"))
                            .at(lhs.span, "assigned again here")
                            .with_label(*prev, "first assigned here")
                            .with_note("NNEF identifiers are single-assignment: use a new name"),
                    );
                }
                if scope.in_graph {
                    self.check_graph_value(name, &v, lhs.span)?;
                    if let Value::Tensor(id) = v
                        && self.graph.values[id.index()].name.is_none()
                    {
                        self.graph.values[id.index()].name = Some(name.clone());
                    }
                }
                fresh.insert(name.clone());
                scope.vars.insert(name.clone(), (v, lhs.span));
                Ok(())
            }
            (ExprKind::Array(pats), Value::Array(items))
            | (ExprKind::Tuple(pats), Value::Tuple(items))
                if pats.len() == items.len() =>
            {
                for (p, i) in pats.iter().zip(items) {
                    self.bind_lhs(p, i, scope, fresh)?;
                }
                Ok(())
            }
            (ExprKind::Array(pats), v) | (ExprKind::Tuple(pats), v) => {
                let kind = if matches!(lhs.kind, ExprKind::Array(_)) {
                    "an array"
                } else {
                    "a tuple"
                };
                Err(
                    Diagnostic::error("the left-hand side does not match the value's structure")
                        .at(
                            lhs.span,
                            format!(
                                "{kind} of {} name{}",
                                pats.len(),
                                if pats.len() == 1 { "" } else { "s" }
                            ),
                        )
                        .with_note(format!(
                            "the right-hand side gives `{}`{}",
                            self.describe(&v),
                            match &v {
                                Value::Array(a) | Value::Tuple(a) => format!(
                                    " with {} item{}",
                                    a.len(),
                                    if a.len() == 1 { "" } else { "s" }
                                ),
                                _ => String::new(),
                            }
                        )),
                )
            }
            (_, _) => Err(Diagnostic::error("invalid left-hand side").at(
                lhs.span,
                "expected an identifier, or an array or tuple of identifiers",
            )),
        }
    }

    /// Spec rule 18: a graph identifier holds one tensor. Arrays and tuples of tensors
    /// are destructured on the left-hand side (`[a, b] = split(...)`), as the Khronos
    /// parser requires.
    fn check_graph_value(&self, name: &str, v: &Value, span: Span) -> EResult<()> {
        fn all_tensors(v: &Value) -> bool {
            match v {
                Value::Tensor(_) => true,
                Value::Array(a) | Value::Tuple(a) => a.iter().all(all_tensors),
                _ => false,
            }
        }
        if let Value::Tensor(_) = v {
            Ok(())
        } else if let (true, Value::Array(items) | Value::Tuple(items)) = (all_tensors(v), v) {
            let names: Vec<String> = (1..=items.len().min(4))
                .map(|i| format!("{name}{i}"))
                .collect();
            let more = if items.len() > 4 { ", ..." } else { "" };
            let pattern = match v {
                Value::Array(_) => format!("[{}{more}]", names.join(", ")),
                _ => format!("({}{more})", names.join(", ")),
            };
            Err(Diagnostic::error(format!(
                "graph identifier `{name}` is bound to {} of {} tensors",
                if matches!(v, Value::Array(_)) {
                    "an array"
                } else {
                    "a tuple"
                },
                items.len()
            ))
            .at(span, format!("this is assigned `{}`", self.describe(v)))
            .with_note(format!(
                "a graph identifier holds one tensor: name each item, e.g. `{pattern} = ...;`"
            )))
        } else {
            Err(Diagnostic::error(format!("graph identifier `{name}` must hold a tensor"))
                .at(span, format!("this is assigned `{}`", self.describe(v)))
                .with_note("attribute values can only be used inside expressions or fragments; to make a tensor of a value use `constant(shape = [], value = [x])`"))
        }
    }

    /// Evaluates the graph body and fills graph inputs/outputs.
    pub fn run_graph(&mut self, g: &GraphDef) -> Result<(), Diagnostics> {
        let mut errors = Vec::new();
        let mut params: HashMap<&str, Span> = HashMap::new();
        for p in &g.params {
            if let Some(prev) = params.insert(&p.name, p.span) {
                errors.push(
                    Diagnostic::error(format!("graph input `{}` is listed twice", p.name))
                        .at(p.span, "duplicate")
                        .with_label(prev, "first listed here"),
                );
            }
        }
        let mut results: HashMap<&str, Span> = HashMap::new();
        for r in &g.results {
            if let Some(prev) = results.insert(&r.name, r.span) {
                errors.push(
                    Diagnostic::error(format!("graph output `{}` is listed twice", r.name))
                        .at(r.span, "duplicate")
                        .with_label(prev, "first listed here")
                        .with_note("outputs are the model's interface: each needs its own name"),
                );
            }
            if let Some(p) = params.get(r.name.as_str()) {
                errors.push(
                    Diagnostic::error(format!(
                        "`{}` is both a graph input and a graph output",
                        r.name
                    ))
                    .at(r.span, "listed as an output here")
                    .with_label(*p, "listed as an input here")
                    .with_note(format!(
                        "give the output its own name, e.g. `{0}_out`, and assign it: `{0}_out = copy({0});`",
                        r.name
                    )),
                );
            }
        }
        if !errors.is_empty() {
            // Evaluating the body would only add consequences of the clash.
            return Err(Diagnostics(errors));
        }
        let mut scope = Scope::new(true, None);
        self.graph_lhs.clear();
        for a in &g.body {
            let mut names = Vec::new();
            lhs_names(&a.lhs, &mut names);
            for (n, span) in names {
                self.graph_lhs.entry(n).or_insert(span);
            }
        }
        for a in &g.body {
            if let Err(d) = self.graph_assignment(a, &params, &mut scope) {
                errors.push(d);
                // Later statements would mostly report consequences of this one.
                return Err(Diagnostics(errors));
            }
        }
        for p in &g.params {
            if !scope.vars.contains_key(&p.name) {
                errors.push(
                    Diagnostic::error(format!("graph input `{}` is never assigned", p.name))
                        .at(p.span, "declared as an input here")
                        .with_note(format!(
                            "assign it with `{} = external<scalar>(shape = [...]);`",
                            p.name
                        )),
                );
            }
        }
        let mut unknown: Vec<_> = self
            .quant
            .values()
            .filter(|e| !scope.vars.contains_key(&e.tensor))
            .collect();
        unknown.sort_by_key(|e| e.span.start);
        for e in unknown {
            errors.push(Diagnostic::error(format!("graph.quant names `{}`, which the graph does not assign", e.tensor))
                .at(e.tensor_span, "unknown tensor identifier")
                .with_note("keys are graph identifiers (the left-hand side of an assignment), not variable labels"));
        }
        for r in &g.results {
            match scope.vars.get(&r.name) {
                None => errors.push(
                    Diagnostic::error(format!("graph output `{}` is never assigned", r.name))
                        .at(r.span, "declared as an output here"),
                ),
                Some((Value::Tensor(id), _)) => {
                    let id = self.output_value(*id, &r.name);
                    self.graph.outputs.push(id);
                }
                Some((v, _)) => errors.push(
                    Diagnostic::error(format!("graph output `{}` must be a single tensor", r.name))
                        .at(r.span, format!("it holds `{}`", self.describe(v))),
                ),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Diagnostics(errors))
        }
    }

    /// The value to list as graph output `name`. Outputs are ABI: each has its own
    /// buffer and name. A tensor that is a graph input, a constant, or an output already
    /// listed (`y = x;`, a fragment returning its argument, `graph g(x) -> (a, b)` with
    /// `b = a;`) gets a `copy` node of its own, named `name`; a tensor that merely carries
    /// another identifier's name (`a = relu(x); y = a;`) is renamed.
    fn output_value(&mut self, id: ValueId, name: &str) -> ValueId {
        let value = &self.graph.values[id.index()];
        let shared = !matches!(value.def, ValueDef::Node(..)) || self.graph.outputs.contains(&id);
        if shared {
            // A copy has its operand's type (`ir::infer` agrees; the verifier checks it).
            let ty = value.ty.clone();
            let copy = self
                .graph
                .add_node(Op::Unary(UnaryOp::Copy), vec![id], vec![ty])[0];
            self.node_spans.push(None);
            self.graph.values[copy.index()].name = Some(name.to_string());
            return copy;
        }
        let quantized = format!("{name}.quantized");
        match &value.name {
            Some(n) if n == name || *n == quantized => {}
            _ => self.graph.values[id.index()].name = Some(name.to_string()),
        }
        id
    }

    fn graph_assignment(
        &mut self,
        a: &Assignment,
        params: &HashMap<&str, Span>,
        scope: &mut Scope,
    ) -> EResult<()> {
        let is_external =
            matches!(&a.rhs.kind, ExprKind::Invocation { name, .. } if name.name == "external");
        self.external_name = None;
        if is_external {
            match &a.lhs.kind {
                ExprKind::Ident(n) if params.contains_key(n.as_str()) => {
                    self.external_name = Some(n.clone())
                }
                ExprKind::Ident(n) => {
                    return Err(Diagnostic::error(format!("`external` assigns `{n}`, which is not a graph input"))
                        .at(a.lhs.span, "not listed in the graph's inputs")
                        .with_note(format!("add `{n}` to the input list `graph name({n}, ...)`, or use `variable` or `constant`")));
                }
                _ => {
                    return Err(Diagnostic::error(
                        "`external` must be assigned to a single identifier",
                    )
                    .at(a.lhs.span, "expected one graph input name"));
                }
            }
        } else {
            let mut names = Vec::new();
            lhs_names(&a.lhs, &mut names);
            for (n, span) in names {
                if params.contains_key(n.as_str()) {
                    return Err(Diagnostic::error(format!(
                        "graph input `{n}` must be assigned by `external`"
                    ))
                    .at(span, "assigned by another operation here")
                    .with_note(format!("write `{n} = external<scalar>(shape = [...]);`")));
                }
            }
        }
        self.current_ident = match &a.lhs.kind {
            ExprKind::Ident(n) => Some(n.clone()),
            _ => None,
        };
        let v = self.eval(&a.rhs, scope)?;
        self.external_name = None;
        self.current_ident = None;
        let mut fresh = HashSet::new();
        self.bind_lhs(&a.lhs, v, scope, &mut fresh)?;
        // Simulated quantization of the tensors graph.quant names.
        let mut fresh: Vec<String> = fresh.into_iter().collect();
        fresh.sort();
        for name in fresh {
            if let Some((Value::Tensor(id), span)) = scope.vars.get(&name).cloned()
                && let Some(q) = self.apply_quant(&name, id, scope)?
            {
                if self.graph.values[q.index()].name.is_none() {
                    self.graph.values[q.index()].name = Some(format!("{name}.quantized"));
                }
                scope.vars.insert(name, (Value::Tensor(q), span));
            }
        }
        Ok(())
    }
}

fn lhs_names(e: &Expr, out: &mut Vec<(String, Span)>) {
    match &e.kind {
        ExprKind::Ident(n) => out.push((n.clone(), e.span)),
        ExprKind::Array(items) | ExprKind::Tuple(items) => {
            items.iter().for_each(|i| lhs_names(i, out))
        }
        _ => {}
    }
}

/// `fragment conv(input: tensor<scalar>, ...) -> (output: tensor<scalar>)` for notes.
pub fn signature(def: &FragmentDef) -> String {
    let params: Vec<String> = def
        .params
        .iter()
        .map(|p| {
            let mut s = format!("{}: {}", p.name.name, describe_spec(&p.ty, None));
            if p.default.is_some() {
                s.push_str(" = …");
            }
            s
        })
        .collect();
    let results: Vec<String> = def
        .results
        .iter()
        .map(|r| format!("{}: {}", r.name.name, describe_spec(&r.ty, None)))
        .collect();
    let generic = match &def.generic {
        None => String::new(),
        Some(None) => "<?>".into(),
        Some(Some(t)) => format!("<? = {}>", describe_spec(t, None)),
    };
    format!(
        "signature: {}{generic}({}) -> ({})",
        def.name.name,
        params.join(", "),
        results.join(", ")
    )
}
