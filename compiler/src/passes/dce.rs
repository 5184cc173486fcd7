//! `dce`: removes nodes and constants that no graph output depends on.
//!
//! A node is live if one of its results is a graph output or an operand of a live node.
//! Graph inputs are always kept (they are the ABI), even when unused. Cost: one backward
//! walk and one rebuild.

use super::{Changed, Pass, PassError};
use crate::ir::Graph;
use crate::ir::graph::ValueDef;
use crate::ir::rewrite::Rewriter;

pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&mut self, graph: &mut Graph) -> Result<Changed, PassError> {
        let mut live_value = vec![false; graph.values.len()];
        for &v in &graph.outputs {
            live_value[v.index()] = true;
        }
        let mut live_node = vec![false; graph.nodes.len()];
        for (i, node) in graph.nodes.iter().enumerate().rev() {
            if node.outputs.iter().any(|v| live_value[v.index()]) {
                live_node[i] = true;
                for v in &node.inputs {
                    live_value[v.index()] = true;
                }
            }
        }
        let dead_consts = graph
            .values
            .iter()
            .enumerate()
            .any(|(i, v)| matches!(v.def, ValueDef::Const(_)) && !live_value[i]);
        let unreferenced_consts = graph.consts.len()
            != graph
                .values
                .iter()
                .filter(|v| matches!(v.def, ValueDef::Const(_)))
                .count();
        if live_node.iter().all(|&l| l) && !dead_consts && !unreferenced_consts {
            return Ok(Changed::No);
        }
        let mut rw = Rewriter::new(graph);
        for (i, node) in graph.nodes.iter().enumerate() {
            if live_node[i] && !rw.copy_node(node) {
                return Err(PassError::Internal {
                    pass: "dce",
                    message: format!("node #n{i} reads an undefined value"),
                });
            }
        }
        *graph = rw.finish().ok_or(PassError::Internal {
            pass: "dce",
            message: "a graph output is undefined".into(),
        })?;
        Ok(Changed::Yes)
    }
}
