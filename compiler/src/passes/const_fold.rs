//! `const-fold`: evaluates nodes whose operands are all constants, with the reference
//! interpreter, and replaces their results by constants.
//!
//! Folding is skipped when it would bloat the object: a result larger than
//! [`ConstFold::max_bytes`] is kept as a node, and so is a result more than twice the size
//! of its operands once past [`ConstFold::free_bytes`] (a `tile` or a broadcast of a
//! small constant is cheaper to compute than to store). Nodes whose results are graph
//! outputs are folded too (the back end copies constant outputs). An evaluation error is
//! not a pass failure: the node is left for the back end, which reports it with context.

use super::{Changed, Pass, PassError};
use crate::ir::Graph;
use crate::ir::interp;
use crate::ir::rewrite::Rewriter;

pub struct ConstFold {
    /// Never fold a result larger than this.
    pub max_bytes: usize,
    /// Results up to this size are folded even if larger than their operands.
    pub free_bytes: usize,
}

impl Default for ConstFold {
    fn default() -> Self {
        // 64 MiB covers every weight transform (transpose, reshape, batch-norm parameter
        // arithmetic) of the models we know; 64 KiB bounds the growth of small expansions.
        ConstFold {
            max_bytes: 64 << 20,
            free_bytes: 64 << 10,
        }
    }
}

impl Pass for ConstFold {
    fn name(&self) -> &'static str {
        "const-fold"
    }

    fn run(&mut self, graph: &mut Graph) -> Result<Changed, PassError> {
        let mut rw = Rewriter::new(graph);
        let mut changed = Changed::No;
        for node in &graph.nodes {
            let Some(inputs) = node
                .inputs
                .iter()
                .map(|&v| rw.map(v))
                .collect::<Option<Vec<_>>>()
            else {
                return Err(PassError::Internal {
                    pass: "const-fold",
                    message: "operand read before definition".into(),
                });
            };
            let consts: Option<Vec<_>> =
                inputs.iter().map(|&v| rw.new_graph().const_of(v)).collect();
            if let Some(consts) = consts {
                let in_bytes: usize = consts.iter().map(|t| t.len() * t.dtype().size()).sum();
                let out_bytes = node
                    .outputs
                    .iter()
                    .map(|&o| graph.ty(o).byte_size())
                    .try_fold(0usize, |acc, b| b.map(|b| acc + b));
                let small_enough = match out_bytes {
                    Some(b) => b <= self.max_bytes && (b <= self.free_bytes || b <= 2 * in_bytes),
                    None => false,
                };
                if small_enough {
                    let refs: Vec<&crate::ir::Tensor> = consts.iter().copied().collect();
                    if let Ok(results) = interp::eval_op(&node.op, &refs) {
                        let results_match = results.len() == node.outputs.len()
                            && results.iter().zip(&node.outputs).all(|(t, &o)| {
                                Some(t.shape.clone()) == graph.ty(o).shape()
                                    && t.dtype() == graph.ty(o).dtype
                            });
                        if results_match {
                            for (t, &o) in results.into_iter().zip(&node.outputs) {
                                let c = rw.add_const(t, graph.value(o).name.clone());
                                rw.alias(o, c);
                            }
                            changed = Changed::Yes;
                            continue;
                        }
                    }
                }
            }
            if !rw.copy_node(node) {
                return Err(PassError::Internal {
                    pass: "const-fold",
                    message: "operand read before definition".into(),
                });
            }
        }
        if changed == Changed::Yes {
            *graph = rw.finish().ok_or(PassError::Internal {
                pass: "const-fold",
                message: "a graph output is undefined".into(),
            })?;
        }
        Ok(changed)
    }
}
