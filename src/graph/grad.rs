//! Reverse-mode gradients on a built (or loaded) graph: [`grad`] appends to the graph the
//! ops that compute ∂loss/∂param, written with the same NNEF fragments as any other
//! statement, so the result is checked, written and compiled like the rest.
//!
//! Each rule maps one fragment's output adjoint to its tensor arguments' adjoints, at the
//! NNEF level (`linear`, `softmax`, `max_pool` are differentiated whole, not through their
//! bodies). Broadcast operands get their adjoint summed back to their shape. Rules exist
//! for what MLPs and CNNs train with (the list is [`RULES`]); a path from a parameter to the
//! loss through any other op, or through an argument a rule does not cover (a clamp bound,
//! a batch-norm mean), is an error naming the op, never a silently wrong gradient. Each
//! rule is checked against finite differences in `tests/all/graph_grad.rs`.
//!
//! Not here: higher-order gradients of ops whose rules use ops without rules
//! (`argmax_pool`), and shapes left open.

use super::{Def, Error, Graph, Result, SArg, Value};
use nnefc_compiler::front::syntax::ast::{Expr, ExprKind, Literal, UnaryOp};
use nnefc_compiler::ir::infer::{resolved_conv_padding, resolved_window_padding, slice_ranges};
use nnefc_compiler::ir::{Border, ConvAttrs, DType, WindowAttrs};
use std::collections::HashMap;
use std::panic::Location;

/// The fragments [`grad`] differentiates.
pub const RULES: &[&str] = &[
    "copy",
    "neg",
    "exp",
    "log",
    "sqr",
    "sqrt",
    "abs",
    "relu",
    "sigmoid",
    "tanh",
    "leaky_relu",
    "elu",
    "softplus",
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "min",
    "max",
    "clamp",
    "select",
    "matmul",
    "linear",
    "conv",
    "max_pool",
    "avg_pool",
    "softmax",
    "reshape",
    "squeeze",
    "unsqueeze",
    "transpose",
    "concat",
    "split",
    "slice",
    "sum_reduce",
    "mean_reduce",
    "max_reduce",
    "batch_normalization",
    "tile",
    "pad",
];

/// Adds to the graph of `loss` the gradient of `loss` with respect to each of `params`,
/// in order. `loss` must hold one element (shape `[]` or all extents 1); a parameter the
/// loss does not depend on gets zeros. Parameters are usually graph inputs (so that a
/// training step takes the current weights) but may be any value.
#[track_caller]
pub fn grad(loss: &Value, params: &[Value]) -> Result<Vec<Value>> {
    let at = Location::caller();
    let g = loss.graph();
    for p in params {
        g.check_same(p, "grad", at)?;
    }
    let loss_shape = known_shape(loss, at)?;
    if loss_shape.iter().product::<usize>() != 1 {
        return Err(Error::new(
            Some(at),
            format!(
                "grad: the loss `{}` has shape {loss_shape:?}; it must hold one element",
                loss.name()
            ),
        )
        .note("reduce it first, e.g. with sum_reduce or mean_reduce over every axis"));
    }
    let cx = Cx { g: &g, at };
    // Which values depend on a parameter (only those need adjoints).
    let n_stmts = g.inner.borrow().stmts.len();
    let mut needs: Vec<bool> = vec![false; g.inner.borrow().values.len()];
    for p in params {
        needs[p.id] = true;
    }
    for k in 0..n_stmts {
        let (args, results) = {
            let inner = g.inner.borrow();
            let s = &inner.stmts[k];
            let mut a = Vec::new();
            for (_, x) in &s.args {
                super::sarg_values(x, &mut a);
            }
            let mut r = Vec::new();
            s.results.ids(&mut r);
            (a, r)
        };
        if args.iter().any(|&v| needs[v]) {
            for r in results {
                needs[r] = true;
            }
        }
    }
    {
        let inner = g.inner.borrow();
        for (i, v) in inner.values.iter().enumerate() {
            if needs.get(i).copied().unwrap_or(false) && matches!(v.def, Def::Placeholder(_)) {
                return Err(Error::new(
                    Some(at),
                    format!(
                        "grad: the path to the loss goes through placeholder `{}`",
                        v.ident
                    ),
                )
                .note("gradients are taken on graphs without placeholders"));
            }
        }
    }
    let mut adj: HashMap<usize, usize> = HashMap::new();
    if needs[loss.id] {
        let seed = cx.fill(&loss_shape, 1.0)?;
        adj.insert(loss.id, seed);
    }
    for k in (0..n_stmts).rev() {
        let stmt = g.inner.borrow().stmts[k].clone();
        let mut results = Vec::new();
        stmt.results.ids(&mut results);
        if !results.iter().any(|r| adj.contains_key(r)) {
            continue;
        }
        let bound = cx.bind(&stmt)?;
        let wanted =
            |name: &str| -> bool { matches!(bound.get(name), Some(SArg::Value(v)) if needs[*v]) };
        let contributions = cx.rule(&stmt.op, &bound, &results, &adj, &wanted)?;
        for (v, d) in contributions {
            if !needs[v] {
                continue;
            }
            let total = match adj.get(&v) {
                Some(&prev) => cx.op(
                    "add",
                    vec![(None, SArg::Value(prev)), (None, SArg::Value(d))],
                )?,
                None => d,
            };
            adj.insert(v, total);
        }
    }
    params
        .iter()
        .map(|p| {
            let id = match adj.get(&p.id) {
                Some(&d) => d,
                None => cx.fill(&known_shape(p, at)?, 0.0)?,
            };
            Ok(g.handle(id))
        })
        .collect()
}

/// One step of stochastic gradient descent as graph ops: `param − rate · ∂loss/∂param`
/// for each parameter, in order. Make the results outputs and feed them back as the
/// parameters of the next run: the whole training step is native code.
#[track_caller]
pub fn sgd(loss: &Value, params: &[Value], rate: f32) -> Result<Vec<Value>> {
    let at = Location::caller();
    let grads = grad(loss, params)?;
    let g = loss.graph();
    let cx = Cx { g: &g, at };
    params
        .iter()
        .zip(grads)
        .map(|(p, d)| {
            let step = cx.bin_s("mul", d.id, f64::from(rate))?;
            Ok(g.handle(cx.bin("sub", p.id, step)?))
        })
        .collect()
}

fn known_shape(v: &Value, at: &'static Location<'static>) -> Result<Vec<usize>> {
    v.shape()
        .into_iter()
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| {
            Error::new(
                Some(at),
                format!("grad: `{}` has open extents {:?}", v.name(), v.shape()),
            )
            .note("gradients need every extent known: give the inputs fixed shapes")
        })
}

/// Emits ops for one `grad` call.
struct Cx<'a> {
    g: &'a Graph,
    at: &'static Location<'static>,
}

type Bound = HashMap<String, SArg>;

fn v(id: usize) -> (Option<String>, SArg) {
    (None, SArg::Value(id))
}
fn named(n: &str, a: SArg) -> (Option<String>, SArg) {
    (Some(n.to_string()), a)
}
fn ints(xs: &[i64]) -> SArg {
    SArg::Array(xs.iter().map(|&x| SArg::Integer(x)).collect())
}
fn uints(xs: &[usize]) -> SArg {
    SArg::Array(xs.iter().map(|&x| SArg::Integer(x as i64)).collect())
}
fn pairs(xs: &[(usize, usize)]) -> SArg {
    SArg::Array(
        xs.iter()
            .map(|&(a, b)| SArg::Tuple(vec![SArg::Integer(a as i64), SArg::Integer(b as i64)]))
            .collect(),
    )
}

impl Cx<'_> {
    fn op(&self, name: &str, args: Vec<(Option<String>, SArg)>) -> Result<usize> {
        let out = self.g.statement(name, None, args, self.at)?;
        Ok(super::Outputs::single_at(out, self.at)?.id)
    }

    fn shape(&self, id: usize) -> Result<Vec<usize>> {
        known_shape(&self.g.handle(id), self.at)
    }

    fn fill(&self, shape: &[usize], x: f32) -> Result<usize> {
        let args = vec![
            named("shape", uints(shape)),
            named("value", SArg::Array(vec![SArg::Scalar(f64::from(x))])),
        ];
        let out = self
            .g
            .statement("constant", Some(DType::F32), args, self.at)?;
        Ok(super::Outputs::single_at(out, self.at)?.id)
    }

    fn unary(&self, name: &str, x: usize) -> Result<usize> {
        self.op(name, vec![v(x)])
    }
    fn bin(&self, name: &str, x: usize, y: usize) -> Result<usize> {
        self.op(name, vec![v(x), v(y)])
    }
    fn bin_s(&self, name: &str, x: usize, y: f64) -> Result<usize> {
        self.op(name, vec![v(x), (None, SArg::Scalar(y))])
    }
    fn select(&self, c: usize, t: SArg, f: SArg) -> Result<usize> {
        self.op("select", vec![v(c), (None, t), (None, f)])
    }

    /// Sums `d` (shaped like the broadcast result) back to `target`'s shape.
    fn unbroadcast(&self, d: usize, target: usize) -> Result<usize> {
        let ds = self.shape(d)?;
        let ts = self.shape(target)?;
        if ds == ts {
            return Ok(d);
        }
        let axes: Vec<usize> = (0..ds.len())
            .filter(|&i| ts.get(i).copied().unwrap_or(1) == 1 && ds[i] != 1)
            .collect();
        let mut r = d;
        if !axes.is_empty() {
            r = self.op("sum_reduce", vec![v(r), named("axes", uints(&axes))])?;
        }
        if self.shape(r)? != ts {
            let shape: Vec<i64> = ts.iter().map(|&x| x as i64).collect();
            r = self.op("reshape", vec![v(r), named("shape", ints(&shape))])?;
        }
        Ok(r)
    }

    /// `d` repeated to `shape` along the axes where it has extent 1.
    fn expand(&self, d: usize, shape: &[usize]) -> Result<usize> {
        let ds = self.shape(d)?;
        if ds == shape {
            return Ok(d);
        }
        let repeats: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if ds.get(i).copied().unwrap_or(1) == n {
                    1
                } else {
                    n
                }
            })
            .collect();
        self.op("tile", vec![v(d), named("repeats", uints(&repeats))])
    }

    /// The arguments of `stmt` bound to parameter names, defaults filled in.
    fn bind(&self, stmt: &super::Stmt) -> Result<Bound> {
        let lib = self.g.inner.borrow().lib.clone();
        let def = lib.fragment(&stmt.op).ok_or_else(|| {
            Error::new(
                Some(self.at),
                format!("grad: unknown fragment `{}`", stmt.op),
            )
        })?;
        let mut bound = Bound::new();
        let mut positional = 0;
        for (n, a) in &stmt.args {
            let name = match n {
                Some(n) => n.clone(),
                None => {
                    positional += 1;
                    def.params[positional - 1].name.name.clone()
                }
            };
            bound.insert(name, a.clone());
        }
        for p in &def.params {
            if !bound.contains_key(&p.name.name)
                && let Some(d) = &p.default
            {
                bound.insert(
                    p.name.name.clone(),
                    literal(d).ok_or_else(|| {
                        Error::new(
                            Some(self.at),
                            format!(
                                "grad: the default of `{}` of `{}` is not a literal",
                                p.name.name, stmt.op
                            ),
                        )
                    })?,
                );
            }
        }
        Ok(bound)
    }

    fn unsupported(&self, op: &str, what: &str) -> Error {
        Error::new(
            Some(self.at),
            format!("grad: no gradient for {what} of `{op}`"),
        )
        .note(format!("ops with gradients: {}", RULES.join(", ")))
    }

    /// The adjoint contributions of one statement: (argument value, its adjoint).
    fn rule(
        &self,
        op: &str,
        b: &Bound,
        results: &[usize],
        adj: &HashMap<usize, usize>,
        wanted: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(usize, usize)>> {
        let val = |name: &str| -> Option<usize> {
            match b.get(name) {
                Some(SArg::Value(v)) => Some(*v),
                _ => None,
            }
        };
        let req = |name: &str| -> Result<usize> {
            val(name).ok_or_else(|| {
                Error::new(
                    Some(self.at),
                    format!("grad: `{op}` has no tensor `{name}`"),
                )
            })
        };
        let int_list = |name: &str| int_list(b, name);
        let scalar = |name: &str| -> f64 {
            match b.get(name) {
                Some(SArg::Scalar(x)) => *x,
                Some(SArg::Integer(i)) => *i as f64,
                _ => 0.0,
            }
        };
        let logical = |name: &str| matches!(b.get(name), Some(SArg::Logical(true)));
        let y = results[0];
        let Some(&g) = adj
            .get(&y)
            .or_else(|| results.iter().find_map(|r| adj.get(r)))
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        // Element-wise unary ops: d = g · f'(x).
        let unary_x = |f: &dyn Fn(usize) -> Result<usize>| -> Result<Vec<(usize, usize)>> {
            let x = req("x")?;
            Ok(if wanted("x") {
                vec![(x, f(x)?)]
            } else {
                Vec::new()
            })
        };
        match op {
            "copy" => return unary_x(&|_| Ok(g)),
            "neg" => return unary_x(&|_| self.unary("neg", g)),
            "exp" => return unary_x(&|_| self.bin("mul", g, y)),
            "log" => return unary_x(&|x| self.bin("div", g, x)),
            "sqr" => {
                return unary_x(&|x| {
                    let t = self.bin("mul", g, x)?;
                    self.bin_s("mul", t, 2.0)
                });
            }
            "sqrt" => {
                return unary_x(&|_| {
                    let t = self.bin("div", g, y)?;
                    self.bin_s("mul", t, 0.5)
                });
            }
            "abs" => {
                return unary_x(&|x| {
                    let s = self.unary("sign", x)?;
                    self.bin("mul", g, s)
                });
            }
            "relu" => {
                return unary_x(&|x| {
                    let c = self.bin_s("gt", x, 0.0)?;
                    self.select(c, SArg::Value(g), SArg::Scalar(0.0))
                });
            }
            "sigmoid" => {
                return unary_x(&|_| {
                    let one_minus = self.op("sub", vec![(None, SArg::Scalar(1.0)), v(y)])?;
                    let t = self.bin("mul", y, one_minus)?;
                    self.bin("mul", g, t)
                });
            }
            "tanh" => {
                return unary_x(&|_| {
                    let y2 = self.bin("mul", y, y)?;
                    let t = self.op("sub", vec![(None, SArg::Scalar(1.0)), v(y2)])?;
                    self.bin("mul", g, t)
                });
            }
            "leaky_relu" => {
                let alpha = scalar("alpha");
                return unary_x(&|x| {
                    let c = self.bin_s("gt", x, 0.0)?;
                    let ga = self.bin_s("mul", g, alpha)?;
                    self.select(c, SArg::Value(g), SArg::Value(ga))
                });
            }
            "elu" => {
                let alpha = scalar("alpha");
                return unary_x(&|x| {
                    let c = self.bin_s("gt", x, 0.0)?;
                    let ya = self.bin_s("add", y, alpha)?;
                    let gy = self.bin("mul", g, ya)?;
                    self.select(c, SArg::Value(g), SArg::Value(gy))
                });
            }
            "softplus" => {
                return unary_x(&|x| {
                    let s = self.unary("sigmoid", x)?;
                    self.bin("mul", g, s)
                });
            }
            _ => {}
        }
        match op {
            "add" | "sub" | "mul" | "div" | "pow" | "min" | "max" => {
                let (x, yv) = (val("x"), val("y"));
                if let Some(x) = x.filter(|_| wanted("x")) {
                    let d = match op {
                        "add" | "sub" => g,
                        "mul" => match b.get("y") {
                            Some(SArg::Scalar(s)) => self.bin_s("mul", g, *s)?,
                            _ => self.bin("mul", g, req("y")?)?,
                        },
                        "div" => match b.get("y") {
                            Some(SArg::Scalar(s)) => self.bin_s("div", g, *s)?,
                            _ => self.bin("div", g, req("y")?)?,
                        },
                        "pow" => {
                            // y·x^(y−1) = y·out/x (x ≠ 0 where the gradient is defined).
                            let t = self.bin("div", y, x)?;
                            let t = match b.get("y") {
                                Some(SArg::Scalar(s)) => self.bin_s("mul", t, *s)?,
                                _ => self.bin("mul", t, req("y")?)?,
                            };
                            self.bin("mul", g, t)?
                        }
                        _ => {
                            let other = b.get("y").cloned().unwrap_or(SArg::Scalar(0.0));
                            let c = self.op(
                                if op == "min" { "le" } else { "ge" },
                                vec![v(x), (None, other)],
                            )?;
                            self.select(c, SArg::Value(g), SArg::Scalar(0.0))?
                        }
                    };
                    out.push((x, self.unbroadcast(d, x)?));
                }
                if let Some(yy) = yv.filter(|_| wanted("y")) {
                    let d = match op {
                        "add" => g,
                        "sub" => self.unary("neg", g)?,
                        "mul" => match b.get("x") {
                            Some(SArg::Scalar(s)) => self.bin_s("mul", g, *s)?,
                            _ => self.bin("mul", g, req("x")?)?,
                        },
                        "div" => {
                            // −g·out/y.
                            let t = self.bin("mul", g, y)?;
                            let t = self.bin("div", t, yy)?;
                            self.unary("neg", t)?
                        }
                        "pow" => {
                            let xv = req("x")?;
                            let l = self.unary("log", xv)?;
                            let t = self.bin("mul", y, l)?;
                            self.bin("mul", g, t)?
                        }
                        _ => {
                            let other = b.get("x").cloned().unwrap_or(SArg::Scalar(0.0));
                            // x wins ties (le / ge above), so y gets the strict side.
                            let c = self.op(
                                if op == "min" { "lt" } else { "gt" },
                                vec![v(yy), (None, other)],
                            )?;
                            self.select(c, SArg::Value(g), SArg::Scalar(0.0))?
                        }
                    };
                    out.push((yy, self.unbroadcast(d, yy)?));
                }
            }
            "clamp" => {
                if wanted("a") || wanted("b") {
                    return Err(self.unsupported(op, "the bounds"));
                }
                let x = req("x")?;
                if wanted("x") {
                    let lo = b.get("a").cloned().unwrap_or(SArg::Scalar(0.0));
                    let hi = b.get("b").cloned().unwrap_or(SArg::Scalar(0.0));
                    let c1 = self.op("ge", vec![v(x), (None, lo)])?;
                    let c2 = self.op("le", vec![v(x), (None, hi)])?;
                    let c = self.bin("and", c1, c2)?;
                    let d = self.select(c, SArg::Value(g), SArg::Scalar(0.0))?;
                    out.push((x, self.unbroadcast(d, x)?));
                }
            }
            "select" => {
                // The condition is logical: nothing flows back into it.
                let c = req("condition")?;
                if let Some(t) = val("true_value").filter(|_| wanted("true_value")) {
                    let d = self.select(c, SArg::Value(g), SArg::Scalar(0.0))?;
                    out.push((t, self.unbroadcast(d, t)?));
                }
                if let Some(f) = val("false_value").filter(|_| wanted("false_value")) {
                    let d = self.select(c, SArg::Scalar(0.0), SArg::Value(g))?;
                    out.push((f, self.unbroadcast(d, f)?));
                }
            }
            "matmul" => {
                let (a, bm) = (req("A")?, req("B")?);
                let (ta, tb) = (logical("transposeA"), logical("transposeB"));
                let mm = |l: usize, r: usize, tl: bool, tr: bool| {
                    self.op(
                        "matmul",
                        vec![
                            v(l),
                            v(r),
                            named("transposeA", SArg::Logical(tl)),
                            named("transposeB", SArg::Logical(tr)),
                        ],
                    )
                };
                if wanted("A") {
                    let d = match (ta, tb) {
                        (false, false) => mm(g, bm, false, true)?,
                        (false, true) => mm(g, bm, false, false)?,
                        (true, false) => mm(bm, g, false, true)?,
                        (true, true) => mm(bm, g, true, true)?,
                    };
                    out.push((a, d));
                }
                if wanted("B") {
                    let d = match (ta, tb) {
                        (false, false) => mm(a, g, true, false)?,
                        (false, true) => mm(g, a, true, false)?,
                        (true, false) => mm(a, g, false, false)?,
                        (true, true) => mm(g, a, true, true)?,
                    };
                    out.push((bm, d));
                }
            }
            "linear" => {
                let (x, w) = (req("input")?, req("filter")?);
                if wanted("input") {
                    out.push((x, self.bin("matmul", g, w)?));
                }
                if wanted("filter") {
                    let d = self.op(
                        "matmul",
                        vec![v(g), v(x), named("transposeA", SArg::Logical(true))],
                    )?;
                    out.push((w, d));
                }
                if let Some(bias) = val("bias").filter(|_| wanted("bias")) {
                    out.push((bias, self.unbroadcast(g, bias)?));
                }
            }
            "conv" => out.extend(self.conv_rule(b, g, wanted)?),
            "max_pool" | "avg_pool" => {
                let x = req("input")?;
                if wanted("input") {
                    let xs = self.shape(x)?;
                    let w = window(b, &xs);
                    let padding = resolved_window_padding(&w, &xs);
                    let border = match b.get("border") {
                        Some(SArg::Str(s)) => s.clone(),
                        _ => "constant".into(),
                    };
                    let common =
                        |extra: Vec<(Option<String>, SArg)>| -> Vec<(Option<String>, SArg)> {
                            let mut a = extra;
                            a.push(named("size", uints(&w.size)));
                            a.push(named("border", SArg::Str(border.clone())));
                            a.push(named("padding", pairs(&padding)));
                            a.push(named("stride", uints(&w.stride)));
                            a.push(named("dilation", uints(&w.dilation)));
                            a
                        };
                    let d = if op == "max_pool" {
                        let idx = self.op("argmax_pool", common(vec![v(x)]))?;
                        let mut a = common(vec![v(g), v(idx)]);
                        a.push(named("output_shape", uints(&xs)));
                        self.op("desample", a)?
                    } else {
                        if border != "constant" {
                            return Err(
                                self.unsupported(op, &format!("border `{border}` in the input"))
                            );
                        }
                        let mut a = common(vec![v(g)]);
                        a.push(named("output_shape", uints(&xs)));
                        a.push(named("normalize", SArg::Logical(true)));
                        self.op("debox", a)?
                    };
                    out.push((x, d));
                }
            }
            "softmax" => {
                let x = req("x")?;
                if wanted("x") {
                    let axes = int_list("axes");
                    let gy = self.bin("mul", g, y)?;
                    let s = self.op("sum_reduce", vec![v(gy), named("axes", ints(&axes))])?;
                    let t = self.bin("sub", g, s)?;
                    out.push((x, self.bin("mul", y, t)?));
                }
            }
            "reshape" | "squeeze" | "unsqueeze" => {
                let x = req("input")?;
                if wanted("input") {
                    let xs: Vec<i64> = self.shape(x)?.iter().map(|&n| n as i64).collect();
                    out.push((
                        x,
                        self.op("reshape", vec![v(g), named("shape", ints(&xs))])?,
                    ));
                }
            }
            "transpose" => {
                let x = req("input")?;
                if wanted("input") {
                    let axes = int_list("axes");
                    let mut inv: Vec<i64> = (0..axes.len() as i64).collect();
                    let rank = self.shape(x)?.len();
                    let mut perm: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
                    perm.extend(perm.len()..rank);
                    inv.resize(rank, 0);
                    for (i, &p) in perm.iter().enumerate() {
                        inv[p] = i as i64;
                    }
                    out.push((
                        x,
                        self.op("transpose", vec![v(g), named("axes", ints(&inv))])?,
                    ));
                }
            }
            "concat" => {
                let axis = scalar("axis") as usize;
                let Some(SArg::Array(items)) = b.get("values") else {
                    return Err(self.unsupported(op, "the values"));
                };
                let mut offset = 0;
                for item in items {
                    let SArg::Value(x) = item else { continue };
                    let n = self.shape(*x)?[axis];
                    let d = self.op(
                        "slice",
                        vec![
                            v(g),
                            named("axes", uints(&[axis])),
                            named("begin", uints(&[offset])),
                            named("end", uints(&[offset + n])),
                        ],
                    )?;
                    offset += n;
                    out.push((*x, d));
                }
            }
            "split" => {
                let x = req("value")?;
                if wanted("value") {
                    let axis = scalar("axis") as i64;
                    let mut parts = Vec::new();
                    for &r in results {
                        parts.push(match adj.get(&r) {
                            Some(&d) => SArg::Value(d),
                            None => SArg::Value(self.fill(&self.shape(r)?, 0.0)?),
                        });
                    }
                    let d = self.op(
                        "concat",
                        vec![
                            (None, SArg::Array(parts)),
                            named("axis", SArg::Integer(axis)),
                        ],
                    )?;
                    out.push((x, d));
                }
            }
            "slice" => {
                let x = req("input")?;
                if wanted("input") {
                    let xs = self.shape(x)?;
                    let axes: Vec<usize> = int_list("axes").iter().map(|&a| a as usize).collect();
                    let ranges = slice_ranges(
                        &xs,
                        &axes,
                        &int_list("begin"),
                        &int_list("end"),
                        &int_list("stride"),
                    )
                    .map_err(|e| Error::new(Some(self.at), format!("grad: slice: {e}")))?;
                    if ranges.iter().any(|r| r.stride != 1) {
                        return Err(self.unsupported(op, "a strided slice"));
                    }
                    let padding: Vec<(usize, usize)> = ranges
                        .iter()
                        .zip(&xs)
                        .map(|(r, &n)| (r.start, n - r.start - r.count))
                        .collect();
                    out.push((
                        x,
                        self.op("pad", vec![v(g), named("padding", pairs(&padding))])?,
                    ));
                }
            }
            "tile" => {
                let x = req("input")?;
                if wanted("input") {
                    // out[k·d + i] = x[i] per axis: view g as [r0, d0, r1, d1, …], sum the r's.
                    let xs = self.shape(x)?;
                    let mut reps: Vec<usize> =
                        int_list("repeats").iter().map(|&r| r as usize).collect();
                    reps.resize(xs.len(), 1);
                    let split: Vec<i64> = reps
                        .iter()
                        .zip(&xs)
                        .flat_map(|(&r, &d)| [r as i64, d as i64])
                        .collect();
                    let gv = self.op("reshape", vec![v(g), named("shape", ints(&split))])?;
                    let axes: Vec<usize> = (0..xs.len()).map(|i| 2 * i).collect();
                    let s = self.op("sum_reduce", vec![v(gv), named("axes", uints(&axes))])?;
                    let shape: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
                    out.push((
                        x,
                        self.op("reshape", vec![v(s), named("shape", ints(&shape))])?,
                    ));
                }
            }
            "pad" => {
                let x = req("input")?;
                if wanted("input") {
                    if !matches!(b.get("border"), Some(SArg::Str(s)) if s == "constant") {
                        return Err(
                            self.unsupported(op, "a border other than `constant` in the input")
                        );
                    }
                    let xs = self.shape(x)?;
                    let begin: Vec<i64> = padding_of(b).iter().map(|&(a, _)| a as i64).collect();
                    let axes: Vec<usize> = (0..xs.len()).collect();
                    let begin: Vec<i64> = (0..xs.len())
                        .map(|i| begin.get(i).copied().unwrap_or(0))
                        .collect();
                    let end: Vec<i64> = begin
                        .iter()
                        .zip(&xs)
                        .map(|(&b0, &n)| b0 + n as i64)
                        .collect();
                    let d = self.op(
                        "slice",
                        vec![
                            v(g),
                            named("axes", uints(&axes)),
                            named("begin", ints(&begin)),
                            named("end", ints(&end)),
                        ],
                    )?;
                    out.push((x, d));
                }
            }
            "sum_reduce" | "mean_reduce" => {
                let x = req("input")?;
                if wanted("input") {
                    let xs = self.shape(x)?;
                    let mut d = self.expand(g, &xs)?;
                    if op == "mean_reduce" || logical("normalize") {
                        let count: usize =
                            int_list("axes").iter().map(|&a| xs[a as usize]).product();
                        d = self.bin_s("div", d, count as f64)?;
                    }
                    out.push((x, d));
                }
            }
            "max_reduce" => {
                let x = req("input")?;
                if wanted("input") {
                    let xs = self.shape(x)?;
                    let ye = self.expand(y, &xs)?;
                    let c = self.bin("eq", x, ye)?;
                    let ge = self.expand(g, &xs)?;
                    out.push((x, self.select(c, SArg::Value(ge), SArg::Scalar(0.0))?));
                }
            }
            "batch_normalization" => {
                if wanted("mean") || wanted("variance") {
                    return Err(self.unsupported(op, "the mean or variance (inference form)"));
                }
                let (x, var) = (req("input")?, req("variance")?);
                let eps = scalar("epsilon");
                let ve = self.bin_s("add", var, eps)?;
                let inv = self.unary("rsqrt", ve)?;
                let scale = b.get("scale").cloned().unwrap_or(SArg::Scalar(1.0));
                if wanted("input") {
                    let t = self.op("mul", vec![v(g), (None, scale.clone())])?;
                    let d = self.bin("mul", t, inv)?;
                    out.push((x, self.unbroadcast(d, x)?));
                }
                if let Some(off) = val("offset").filter(|_| wanted("offset")) {
                    out.push((off, self.unbroadcast(g, off)?));
                }
                if let Some(sc) = val("scale").filter(|_| wanted("scale")) {
                    let mean = b.get("mean").cloned().unwrap_or(SArg::Scalar(0.0));
                    let c = self.op("sub", vec![v(x), (None, mean)])?;
                    let n = self.bin("mul", c, inv)?;
                    let d = self.bin("mul", g, n)?;
                    out.push((sc, self.unbroadcast(d, sc)?));
                }
            }
            _ => return Err(self.unsupported(op, "the arguments")),
        }
        Ok(out)
    }

    fn conv_rule(
        &self,
        b: &Bound,
        g: usize,
        wanted: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(usize, usize)>> {
        let get = |n: &str| match b.get(n) {
            Some(SArg::Value(v)) => Some(*v),
            _ => None,
        };
        let (Some(x), Some(w)) = (get("input"), get("filter")) else {
            return Err(self.unsupported("conv", "literal input or filter"));
        };
        let list = |n: &str| -> Vec<usize> { uint_list(b, n) };
        let padding = padding_of(b);
        let groups = match b.get("groups") {
            Some(SArg::Integer(n)) => *n as usize,
            _ => 1,
        };
        if !matches!(b.get("border"), None | Some(SArg::Str(_))) {
            return Err(self.unsupported("conv", "the border"));
        }
        if let Some(SArg::Str(s)) = b.get("border")
            && s != "constant"
        {
            return Err(self.unsupported("conv", &format!("border `{s}` in the input")));
        }
        let (xs, ws) = (self.shape(x)?, self.shape(w)?);
        // NNEF's `groups = 0` means one group per input channel.
        let groups = if groups == 0 { xs[1] } else { groups };
        let spatial = xs.len() - 2;
        let mut stride = list("stride");
        let mut dilation = list("dilation");
        stride.resize(spatial, 1);
        dilation.resize(spatial, 1);
        let attrs = ConvAttrs {
            border: Border::Constant,
            padding,
            stride: stride.clone(),
            dilation: dilation.clone(),
            groups,
            output_shape: Vec::new(),
        };
        let pads = resolved_conv_padding(&attrs, &xs, &ws);
        let mut out = Vec::new();
        if wanted("input") {
            let d = self.op(
                "deconv",
                vec![
                    v(g),
                    v(w),
                    named("padding", pairs(&pads)),
                    named("stride", uints(&stride)),
                    named("dilation", uints(&dilation)),
                    named("output_shape", uints(&xs)),
                    named("groups", SArg::Integer(groups as i64)),
                ],
            )?;
            out.push((x, d));
        }
        if wanted("filter") {
            out.push((
                w,
                self.conv_filter_grad(x, g, &xs, &ws, &pads, &stride, &dilation, groups)?,
            ));
        }
        if let Some(bias) = get("bias").filter(|_| wanted("bias")) {
            out.push((bias, self.unbroadcast(g, bias)?));
        }
        Ok(out)
    }

    /// ∂loss/∂filter of `conv(x, w)` with output gradient `g`:
    /// dW[o,c,k] = Σ_{n,p} g[n,o,p]·x[n,c,p·s + k·d], a convolution of x with g where batch
    /// and channels trade places and stride and dilation exchange roles. With G groups of
    /// `ci` input and `co` output channels, each (group, input channel) pair is its own
    /// group of that convolution: x becomes one sample of `Cin·N` channels ordered
    /// (g, i, n), g becomes `G·ci·co` filters of N channels (g's channels of group g,
    /// repeated for each i), and the result's (g, i, o) order is permuted back to
    /// (g, o, i). One grouped convolution, not a loop over groups; with G = 1 the plain
    /// form (batch as the convolution's channels) is used.
    #[allow(clippy::too_many_arguments)]
    fn conv_filter_grad(
        &self,
        x: usize,
        g: usize,
        xs: &[usize],
        ws: &[usize],
        pads: &[(usize, usize)],
        stride: &[usize],
        dilation: &[usize],
        groups: usize,
    ) -> Result<usize> {
        let rank = xs.len();
        let spatial = &xs[2..];
        let n = xs[0];
        let (cin, cout) = (xs[1], ws[0]);
        let (ci, co) = (cin / groups, cout / groups);
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(0, 1);
        let xt = self.op("transpose", vec![v(x), named("axes", uints(&perm))])?;
        let gt = self.op("transpose", vec![v(g), named("axes", uints(&perm))])?;
        let gs = self.shape(g)?;
        let (input, filter) = if groups == 1 {
            (xt, gt)
        } else {
            let mut one_sample = vec![1, cin * n];
            one_sample.extend_from_slice(spatial);
            let input = self.op("reshape", vec![v(xt), named("shape", uints(&one_sample))])?;
            let mut split = vec![groups, 1, co, n];
            split.extend_from_slice(&gs[2..]);
            let f = self.op("reshape", vec![v(gt), named("shape", uints(&split))])?;
            let mut repeats = vec![1; split.len()];
            repeats[1] = ci;
            let f = self.op("tile", vec![v(f), named("repeats", uints(&repeats))])?;
            let mut filters = vec![groups * ci * co, n];
            filters.extend_from_slice(&gs[2..]);
            let f = self.op("reshape", vec![v(f), named("shape", uints(&filters))])?;
            (input, f)
        };
        let mut args = vec![
            v(input),
            v(filter),
            named("padding", pairs(pads)),
            named("stride", uints(dilation)),
            named("dilation", uints(stride)),
        ];
        if groups != 1 {
            args.push(named("groups", SArg::Integer((groups * ci) as i64)));
        }
        let c = self.op("conv", args)?;
        let cs = self.shape(c)?;
        let k = &cs[2..];
        // Back to [C, O, k'...] (G = 1: already) or [O, C/G, k'...] (grouped).
        let c = if groups == 1 {
            c
        } else {
            let mut parts = vec![groups, ci, co];
            parts.extend_from_slice(k);
            let c = self.op("reshape", vec![v(c), named("shape", uints(&parts))])?;
            let mut p: Vec<usize> = (0..parts.len()).collect();
            p.swap(1, 2);
            let c = self.op("transpose", vec![v(c), named("axes", uints(&p))])?;
            let mut back = vec![cout, ci];
            back.extend_from_slice(k);
            self.op("reshape", vec![v(c), named("shape", uints(&back))])?
        };
        // k' ≥ k: keep the filter's extents.
        let axes: Vec<usize> = (2..rank).collect();
        let c = if k != &ws[2..] {
            self.op(
                "slice",
                vec![
                    v(c),
                    named("axes", uints(&axes)),
                    named("begin", uints(&vec![0; axes.len()])),
                    named("end", uints(&ws[2..])),
                ],
            )?
        } else {
            c
        };
        if groups == 1 {
            self.op("transpose", vec![v(c), named("axes", uints(&perm))])
        } else {
            Ok(c)
        }
    }
}

/// The window of a pool statement, every list at full rank.
fn window(b: &Bound, xs: &[usize]) -> WindowAttrs {
    let rank = xs.len();
    let full = |mut v: Vec<usize>| {
        v.resize(rank, 1);
        v
    };
    let list = |n: &str| uint_list(b, n);
    let padding = padding_of(b);
    WindowAttrs {
        size: full(list("size")),
        border: Border::Constant,
        padding,
        stride: full(list("stride")),
        dilation: full(list("dilation")),
        output_shape: Vec::new(),
    }
}

/// An integer-array argument (`axes`, `stride`, …); empty when absent.
fn int_list(b: &Bound, name: &str) -> Vec<i64> {
    match b.get(name) {
        Some(SArg::Array(xs)) => xs
            .iter()
            .filter_map(|x| {
                if let SArg::Integer(i) = x {
                    Some(*i)
                } else {
                    None
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// [`int_list`] of extents (front-end checked non-negative).
fn uint_list(b: &Bound, name: &str) -> Vec<usize> {
    int_list(b, name)
        .into_iter()
        .map(|i| i.max(0) as usize)
        .collect()
}

/// The `padding` argument as pairs; empty (automatic) when absent.
fn padding_of(b: &Bound) -> Vec<(usize, usize)> {
    match b.get("padding") {
        Some(SArg::Array(ps)) => ps
            .iter()
            .filter_map(|p| match p {
                SArg::Tuple(ab) => match ab.as_slice() {
                    [SArg::Integer(a), SArg::Integer(c)] => Some((*a as usize, *c as usize)),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A default value of a stdlib parameter (a literal) as a statement argument.
fn literal(e: &Expr) -> Option<SArg> {
    Some(match &e.kind {
        ExprKind::Literal(Literal::Integer(i)) => SArg::Integer(*i),
        ExprKind::Literal(Literal::Scalar(x)) => SArg::Scalar(*x),
        ExprKind::Literal(Literal::Logical(b)) => SArg::Logical(*b),
        ExprKind::Literal(Literal::String(s)) => SArg::Str(s.clone()),
        ExprKind::Unary {
            op: UnaryOp::Neg,
            operand,
        } => match literal(operand)? {
            SArg::Integer(i) => SArg::Integer(-i),
            SArg::Scalar(x) => SArg::Scalar(-x),
            _ => return None,
        },
        ExprKind::Array(xs) => SArg::Array(xs.iter().map(literal).collect::<Option<_>>()?),
        ExprKind::Tuple(xs) => SArg::Tuple(xs.iter().map(literal).collect::<Option<_>>()?),
        _ => return None,
    })
}
