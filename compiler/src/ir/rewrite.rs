//! Rebuilding a graph while rewriting it: the one mechanism every pass uses to change a
//! graph.
//!
//! A [`Rewriter`] walks an old graph's nodes in order and builds a new graph. For each old
//! node a pass either copies it ([`Rewriter::copy_node`]), replaces it with other nodes or
//! constants, or maps its results onto existing values ([`Rewriter::alias`]). Constants are
//! copied lazily, on first use, so constants nobody reads disappear; values are numbered
//! afresh, so the result is compact. The new graph keeps the old graph's inputs and their
//! order. This module does not decide *what* to rewrite, and it does not re-run shape
//! inference: callers pass result types (normally from `ir::infer`).

use super::graph::{Graph, Node, ValueDef, ValueId};
use super::op::Op;
use super::tensor::Tensor;
use super::types::TensorType;

pub struct Rewriter<'a> {
    old: &'a Graph,
    new: Graph,
    /// old value → new value, filled as old values are defined or aliased.
    map: Vec<Option<ValueId>>,
}

impl<'a> Rewriter<'a> {
    /// Starts a new graph with the old graph's name and inputs.
    pub fn new(old: &'a Graph) -> Rewriter<'a> {
        let mut new = Graph::new(old.name.clone());
        let mut map = vec![None; old.values.len()];
        for &v in &old.inputs {
            let val = old.value(v);
            let nv = new.add_input(val.name.clone().unwrap_or_default(), val.ty.clone());
            new.values[nv.index()].name = val.name.clone();
            map[v.index()] = Some(nv);
        }
        Rewriter { old, new, map }
    }

    pub fn old(&self) -> &'a Graph {
        self.old
    }

    /// The new graph built so far (for type queries).
    pub fn new_graph(&self) -> &Graph {
        &self.new
    }

    /// The new value standing for an old value. Old constants are copied on first use.
    /// Returns `None` only if the old value is an output of a node not yet visited,
    /// which cannot happen for a graph in topological order.
    pub fn map(&mut self, old: ValueId) -> Option<ValueId> {
        if let Some(v) = self.map.get(old.index()).copied().flatten() {
            return Some(v);
        }
        let val = self.old.values.get(old.index())?;
        match val.def {
            ValueDef::Const(c) => {
                let k = &self.old.consts[c.index()];
                let nv = self
                    .new
                    .add_const(k.tensor.clone(), k.label.clone(), val.name.clone());
                self.map[old.index()] = Some(nv);
                Some(nv)
            }
            _ => None,
        }
    }

    /// Makes old value `old` stand for new value `new` from now on.
    pub fn alias(&mut self, old: ValueId, new: ValueId) {
        self.map[old.index()] = Some(new);
    }

    /// Copies an old node as it is (operands mapped). Returns false if an operand has no
    /// new value (a malformed graph; the caller reports it).
    pub fn copy_node(&mut self, node: &Node) -> bool {
        let Some(inputs) = node
            .inputs
            .iter()
            .map(|&v| self.map(v))
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        let types: Vec<TensorType> = node
            .outputs
            .iter()
            .map(|&v| self.old.ty(v).clone())
            .collect();
        let outs = self.new.add_node(node.op.clone(), inputs, types);
        for (&o, &n) in node.outputs.iter().zip(&outs) {
            self.new.values[n.index()].name = self.old.value(o).name.clone();
            self.map[o.index()] = Some(n);
        }
        true
    }

    /// Adds a new node (operands are *new* values).
    pub fn add_node(
        &mut self,
        op: Op,
        inputs: Vec<ValueId>,
        types: Vec<TensorType>,
    ) -> Vec<ValueId> {
        self.new.add_node(op, inputs, types)
    }

    /// Adds a new constant.
    pub fn add_const(&mut self, tensor: Tensor, name: Option<String>) -> ValueId {
        self.new.add_const(tensor, None, name)
    }

    /// Names new value `v` after old value `old` (when `old` has a name and `v` has none):
    /// a node that replaces others keeps a name the user recognizes in dumps and profiles.
    pub fn name_after(&mut self, v: ValueId, old: ValueId) {
        if self.new.values[v.index()].name.is_none() {
            self.new.values[v.index()].name = self.old.value(old).name.clone();
        }
    }

    /// Finishes with the old graph's outputs mapped; `None` if an output has no value.
    pub fn finish(mut self) -> Option<Graph> {
        let outputs = self
            .old
            .outputs
            .iter()
            .map(|&v| self.map(v))
            .collect::<Option<Vec<_>>>()?;
        for (&o, &n) in self.old.outputs.iter().zip(&outputs) {
            // Keep the user's output names on the values that now carry them.
            if self.new.values[n.index()].name.is_none() {
                self.new.values[n.index()].name = self.old.value(o).name.clone();
            }
        }
        self.new.outputs = outputs;
        Some(self.new)
    }
}
