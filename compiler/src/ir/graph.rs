//! The graph: values, nodes in topological order, constants, inputs and outputs.
//!
//! Values are named by typed ids ([`ValueId`], [`NodeId`], [`ConstId`]) that index
//! vectors in the [`Graph`]. Nodes are kept in a topological order: every operand of a
//! node is a graph input, a constant, or an output of an earlier node. Builders here do
//! not infer shapes themselves; `Graph::add_node` takes the result types, and the
//! front end computes them with `ir::infer` (the verifier re-checks them).

use super::op::Op;
use super::tensor::Tensor;
use super::types::TensorType;
use std::fmt;

macro_rules! entity {
    ($name:ident, $sigil:literal) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($sigil, "{}"), self.0)
            }
        }
    };
}

entity!(ValueId, "%v");
entity!(NodeId, "#n");
entity!(ConstId, "%c");

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// The i-th graph input (an NNEF `external`).
    Input(usize),
    /// A constant (NNEF `variable` or `constant`).
    Const(ConstId),
    /// Output `index` of a node.
    Node(NodeId, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub ty: TensorType,
    pub def: ValueDef,
    /// The NNEF identifier this value had, if any (kept for dumps and I/O names).
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

/// Constant data with where it came from (a `variable` label, or `None` for literals).
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    pub tensor: Tensor,
    pub label: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    pub name: String,
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub consts: Vec<Constant>,
    /// Graph inputs in declaration order; `values[inputs[i]].def == Input(i)`.
    pub inputs: Vec<ValueId>,
    /// Graph outputs in declaration order (a value may appear more than once).
    pub outputs: Vec<ValueId>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            ..Graph::default()
        }
    }

    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }
    pub fn ty(&self, id: ValueId) -> &TensorType {
        &self.values[id.index()].ty
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    fn push_value(&mut self, ty: TensorType, def: ValueDef, name: Option<String>) -> ValueId {
        self.values.push(Value { ty, def, name });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Appends a graph input.
    pub fn add_input(&mut self, name: impl Into<String>, ty: TensorType) -> ValueId {
        let i = self.inputs.len();
        let v = self.push_value(ty, ValueDef::Input(i), Some(name.into()));
        self.inputs.push(v);
        v
    }

    /// Adds a constant and the value that refers to it.
    pub fn add_const(
        &mut self,
        tensor: Tensor,
        label: Option<String>,
        name: Option<String>,
    ) -> ValueId {
        let ty = tensor.ty();
        self.consts.push(Constant { tensor, label });
        let c = ConstId(self.consts.len() as u32 - 1);
        self.push_value(ty, ValueDef::Const(c), name)
    }

    /// Appends a node whose result types are already known (computed with
    /// `ir::infer`). Returns the output values.
    pub fn add_node(
        &mut self,
        op: Op,
        inputs: Vec<ValueId>,
        output_types: Vec<TensorType>,
    ) -> Vec<ValueId> {
        let n = NodeId(self.nodes.len() as u32);
        let outputs: Vec<ValueId> = output_types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| self.push_value(ty, ValueDef::Node(n, i), None))
            .collect();
        self.nodes.push(Node {
            op,
            inputs,
            outputs: outputs.clone(),
        });
        outputs
    }

    /// The constant behind a value, if it is one.
    pub fn const_of(&self, v: ValueId) -> Option<&Tensor> {
        match self.value(v).def {
            ValueDef::Const(c) => Some(&self.consts[c.index()].tensor),
            _ => None,
        }
    }

    /// For each value, the nodes that read it (in node order, possibly repeated).
    pub fn users(&self) -> Vec<Vec<NodeId>> {
        let mut users = vec![Vec::new(); self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for v in &n.inputs {
                users[v.index()].push(NodeId(i as u32));
            }
        }
        users
    }
}
