//! The graph verifier: checks every invariant the rest of the compiler relies on, and
//! reports each violation with the printed line it concerns.
//!
//! Invariants, checked in this order:
//!
//! 1. **References** (if any fails, checking stops: later checks index by these ids).
//!    - R1 every graph input id is in range and its value is `ValueDef::Input(i)` for its
//!      position `i`;
//!    - R2 every value's definition is consistent: `Input(i)` is listed as input `i`,
//!      `Const(c)` names an existing constant, `Node(n, i)` names an existing node whose
//!      output `i` is this value;
//!    - R3 every constant is referred to by exactly one value;
//!    - R4 every node output id is in range and defined by that node;
//!    - R5 every node operand id is in range and defined before use (a graph input, a
//!      constant, or an output of an earlier node) — so the node order is topological;
//!    - R6 every graph output id is in range.
//! 2. **Types**
//!    - T1 every layout is a permutation of `0..rank`;
//!    - T2 each constant's tensor has as many elements as its shape says, and the value's
//!      type is the tensor's type (dtype, extents, row-major);
//!    - T3 each node's operands satisfy `ir::infer` — which also checks every attribute
//!      (axes in range, unique and sorted where the op requires; permutations; list
//!      lengths matching the rank; strides, sizes and factors ≥ 1; groups dividing
//!      channels; border modes the op supports; padding within the extent for reflect
//!      borders …) — and the node has as many outputs as `infer` gives, each with the
//!      dtype and extents `infer` computes. Layouts are not compared (infer's results are
//!      row-major; layout assignment may change them).
//!
//! Not yet checked: that every extent is known (required before code generation, see the
//! back end); stage-dependent rules (the IR has no stage or fusion yet); dead values and
//! unused constants; uniqueness of NNEF names; that constant data is finite; that index
//! data (gather indices, sample indices, ROI batch indices) is in range.

use super::graph::{ConstId, Graph, NodeId, ValueDef, ValueId};
use super::infer::infer;
use super::print::{PrintOptions, Printer};
use super::types::TensorType;
use std::fmt;

/// What a verifier error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Graph,
    Input(usize),
    Value(ValueId),
    Const(ConstId),
    Node(NodeId),
    Output(usize),
}

/// One violated invariant: where, the printed line there, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub at: Location,
    /// The printed line of the offending item (`ir::print` form).
    pub context: String,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n  ; error: {}", self.context, self.message)
    }
}

/// Checks every invariant listed in the module doc; returns all violations found.
pub fn verify(g: &Graph) -> Result<(), Vec<VerifyError>> {
    let printer = Printer::new(g, PrintOptions::default());
    let mut v = Verifier {
        g,
        printer,
        errors: Vec::new(),
    };
    v.references();
    if v.errors.is_empty() {
        v.types();
    }
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

/// All errors as text, one block per error (the printed line, then `; error: …`), and a
/// count.
pub fn render_errors(errors: &[VerifyError]) -> String {
    let mut s = String::new();
    for e in errors {
        s.push_str(&e.to_string());
        s.push('\n');
    }
    s.push_str(&format!(
        "; {} error{}\n",
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    ));
    s
}

struct Verifier<'g> {
    g: &'g Graph,
    printer: Printer<'g>,
    errors: Vec<VerifyError>,
}

impl Verifier<'_> {
    fn context(&self, at: Location) -> String {
        match at {
            Location::Graph | Location::Input(_) | Location::Output(_) => self.printer.header(),
            Location::Node(n) => self.printer.node_line(n),
            Location::Const(c) => {
                let owner = self
                    .g
                    .values
                    .iter()
                    .position(|v| v.def == ValueDef::Const(c));
                match owner {
                    Some(i) => self.printer.const_line(ValueId(i as u32)),
                    None => format!("constant {c} (no value refers to it)"),
                }
            }
            Location::Value(v) => match self.g.values.get(v.index()).map(|x| x.def) {
                Some(ValueDef::Node(n, _)) if n.index() < self.g.nodes.len() => {
                    self.printer.node_line(n)
                }
                Some(ValueDef::Const(_)) => self.printer.const_line(v),
                Some(ValueDef::Input(_)) => self.printer.header(),
                _ => format!("value {}", self.printer.value_name(v)),
            },
        }
    }

    fn error(&mut self, at: Location, message: String) {
        let context = self.context(at);
        self.errors.push(VerifyError {
            at,
            context,
            message,
        });
    }

    fn references(&mut self) {
        let g = self.g;
        let nvalues = g.values.len();
        let name = |v: ValueId| self.printer.value_name(v);
        let mut errs: Vec<(Location, String)> = Vec::new();
        // R1
        for (i, &v) in g.inputs.iter().enumerate() {
            match g.values.get(v.index()) {
                None => errs.push((
                    Location::Input(i),
                    format!("input {i} is {}, out of range ({nvalues} values)", name(v)),
                )),
                Some(val) if val.def != ValueDef::Input(i) => errs.push((
                    Location::Input(i),
                    format!("input {i} is {}, which is {}", name(v), describe(val.def)),
                )),
                Some(_) => {}
            }
        }
        // R2, R3
        let mut const_users = vec![0usize; g.consts.len()];
        for (i, val) in g.values.iter().enumerate() {
            let v = ValueId(i as u32);
            match val.def {
                ValueDef::Input(k) => {
                    if g.inputs.get(k) != Some(&v) {
                        errs.push((
                            Location::Value(v),
                            format!(
                                "{} claims to be input {k}, but the graph does not list it there",
                                name(v)
                            ),
                        ));
                    }
                }
                ValueDef::Const(c) => match const_users.get_mut(c.index()) {
                    Some(n) => *n += 1,
                    None => errs.push((
                        Location::Value(v),
                        format!(
                            "{} refers to constant {c}, out of range ({} constants)",
                            name(v),
                            g.consts.len()
                        ),
                    )),
                },
                ValueDef::Node(n, k) => {
                    let ok = g
                        .nodes
                        .get(n.index())
                        .is_some_and(|node| node.outputs.get(k) == Some(&v));
                    if !ok {
                        errs.push((
                            Location::Value(v),
                            format!(
                                "{} claims to be output {k} of node {n}, which does not produce it",
                                name(v)
                            ),
                        ));
                    }
                }
            }
        }
        for (c, &n) in const_users.iter().enumerate() {
            if n != 1 {
                errs.push((
                    Location::Const(ConstId(c as u32)),
                    format!("constant %c{c} is referred to by {n} values (must be exactly 1)"),
                ));
            }
        }
        // R4, R5
        for (ni, node) in g.nodes.iter().enumerate() {
            let n = NodeId(ni as u32);
            for (k, &o) in node.outputs.iter().enumerate() {
                match g.values.get(o.index()) {
                    None => errs.push((
                        Location::Node(n),
                        format!("output {k} is {}, out of range ({nvalues} values)", name(o)),
                    )),
                    Some(val) if val.def != ValueDef::Node(n, k) => errs.push((
                        Location::Node(n),
                        format!(
                            "output {k} ({}) is {}, not this node's",
                            name(o),
                            describe(val.def)
                        ),
                    )),
                    Some(_) => {}
                }
            }
            for (k, &x) in node.inputs.iter().enumerate() {
                match g.values.get(x.index()).map(|val| val.def) {
                    None => errs.push((
                        Location::Node(n),
                        format!(
                            "operand {k} is {}, out of range ({nvalues} values)",
                            name(x)
                        ),
                    )),
                    Some(ValueDef::Node(m, _)) if m.index() >= ni => errs.push((
                        Location::Node(n),
                        format!(
                            "operand {k} ({}) is used before it is defined (by node {m})",
                            name(x)
                        ),
                    )),
                    Some(_) => {}
                }
            }
        }
        // R6
        for (i, &v) in g.outputs.iter().enumerate() {
            if v.index() >= nvalues {
                errs.push((
                    Location::Output(i),
                    format!("output {i} is {}, out of range ({nvalues} values)", name(v)),
                ));
            }
        }
        for (at, m) in errs {
            self.error(at, m);
        }
    }

    fn types(&mut self) {
        let g = self.g;
        // T1
        for (i, val) in g.values.iter().enumerate() {
            let rank = val.ty.rank();
            let mut seen = vec![false; rank];
            let ok = val.ty.layout.minor_to_major.len() == rank
                && val
                    .ty
                    .layout
                    .minor_to_major
                    .iter()
                    .all(|&d| d < rank && !std::mem::replace(&mut seen[d], true));
            if !ok {
                let v = ValueId(i as u32);
                let m2m = &val.ty.layout.minor_to_major;
                self.error(
                    Location::Value(v),
                    format!(
                        "layout {m2m:?} of {} is not a permutation of 0..{rank}",
                        self.printer.value_name(v)
                    ),
                );
            }
        }
        // T2
        for (i, val) in g.values.iter().enumerate() {
            let ValueDef::Const(c) = val.def else {
                continue;
            };
            let Some(constant) = g.consts.get(c.index()) else {
                continue;
            };
            let t = &constant.tensor;
            let v = ValueId(i as u32);
            let volume: usize = t.shape.iter().product();
            if t.len() != volume {
                self.error(
                    Location::Value(v),
                    format!(
                        "constant data has {} elements but its shape {:?} has {volume}",
                        t.len(),
                        t.shape
                    ),
                );
            } else if !same_type(&val.ty, &t.ty()) || !val.ty.layout.is_row_major() {
                self.error(
                    Location::Value(v),
                    format!(
                        "value type {} differs from its constant's type {}",
                        val.ty,
                        t.ty()
                    ),
                );
            }
        }
        // T3
        for (ni, node) in g.nodes.iter().enumerate() {
            let n = NodeId(ni as u32);
            let operands: Vec<&TensorType> = node.inputs.iter().map(|&x| g.ty(x)).collect();
            match infer(&node.op, &operands) {
                Err(e) => self.error(Location::Node(n), e.message),
                Ok(types) => {
                    if types.len() != node.outputs.len() {
                        self.error(
                            Location::Node(n),
                            format!(
                                "node has {} outputs but {} produces {}",
                                node.outputs.len(),
                                node.op.mnemonic(),
                                types.len()
                            ),
                        );
                        continue;
                    }
                    for (k, (&o, want)) in node.outputs.iter().zip(&types).enumerate() {
                        let have = g.ty(o);
                        if !same_type(have, want) {
                            let msg = format!(
                                "output {k} ({}) has type {have} but {} gives {want}",
                                self.printer.value_name(o),
                                node.op.mnemonic()
                            );
                            self.error(Location::Node(n), msg);
                        }
                    }
                }
            }
        }
    }
}

fn describe(def: ValueDef) -> String {
    match def {
        ValueDef::Input(i) => format!("graph input {i}"),
        ValueDef::Const(c) => format!("constant {c}"),
        ValueDef::Node(n, k) => format!("output {k} of node {n}"),
    }
}

/// Same dtype and extents (layouts are not compared).
fn same_type(a: &TensorType, b: &TensorType) -> bool {
    a.dtype == b.dtype && a.dims == b.dims
}

#[cfg(test)]
mod tests;
