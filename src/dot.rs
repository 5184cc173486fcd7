//! Graphviz (`dot`) drawing of an IR graph, for `nnefc --emit dot`.
//!
//! One box per node labelled with its op and attributes; graph inputs and outputs are
//! ovals; edges carry the tensor type flowing along them. Constants (weights) are not
//! drawn as nodes, which would swamp real models: each node lists the types of its
//! constant operands under its op. This is a picture, not an exchange format; the text
//! IR (`--emit ir`) is the faithful dump.

use nnefc_compiler::ir::print::{attributes, quote};
use nnefc_compiler::ir::{Graph, ValueDef, ValueId};
use std::fmt::Write;

/// Escapes text for a double-quoted dot string.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Attributes longer than this are cut, so boxes stay readable.
const MAX_ATTR: usize = 40;

/// The graph in the dot language.
pub fn to_dot(g: &Graph) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "digraph {} {{", quote(&g.name));
    let _ = writeln!(o, "  rankdir=TB;");
    let _ = writeln!(
        o,
        "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", fontname=\"Helvetica\", fontsize=10];"
    );
    let _ = writeln!(
        o,
        "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];"
    );
    let value_name = |v: ValueId| -> String {
        g.values
            .get(v.index())
            .and_then(|x| x.name.clone())
            .unwrap_or_else(|| format!("{v}"))
    };
    for (i, &v) in g.inputs.iter().enumerate() {
        let ty = g
            .values
            .get(v.index())
            .map(|x| x.ty.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  in{i} [shape=oval, fillcolor=\"#dff0d8\", label=\"{}\\n{}\"];",
            esc(&value_name(v)),
            esc(&ty)
        );
    }
    // Where each value comes from, as a dot node id.
    let source = |v: ValueId| -> Option<String> {
        match g.values.get(v.index())?.def {
            ValueDef::Input(i) => Some(format!("in{i}")),
            ValueDef::Node(n, _) => Some(format!("n{}", n.index())),
            ValueDef::Const(_) => None,
        }
    };
    for (k, node) in g.nodes.iter().enumerate() {
        let mut label = node.op.mnemonic().to_string();
        for (key, val) in attributes(&node.op) {
            let mut val = val;
            if val.chars().count() > MAX_ATTR {
                val = val.chars().take(MAX_ATTR).collect::<String>() + "…";
            }
            let _ = write!(label, "\n{key}={val}");
        }
        for &v in &node.inputs {
            if let Some(val) = g.values.get(v.index())
                && matches!(val.def, ValueDef::Const(_))
            {
                let _ = write!(label, "\n· {}", val.ty);
            }
        }
        let _ = writeln!(
            o,
            "  n{k} [label=\"{}\"];",
            esc(&label).replace('\n', "\\n")
        );
        for &v in &node.inputs {
            if let Some(src) = source(v) {
                let ty = g
                    .values
                    .get(v.index())
                    .map(|x| x.ty.to_string())
                    .unwrap_or_default();
                let _ = writeln!(o, "  {src} -> n{k} [label=\"{}\"];", esc(&ty));
            }
        }
    }
    for (i, &v) in g.outputs.iter().enumerate() {
        let ty = g
            .values
            .get(v.index())
            .map(|x| x.ty.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  out{i} [shape=oval, fillcolor=\"#fcf8e3\", label=\"{}\\n{}\"];",
            esc(&value_name(v)),
            esc(&ty)
        );
        if let Some(src) = source(v) {
            let _ = writeln!(o, "  {src} -> out{i};");
        }
    }
    o.push_str("}\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use nnefc_compiler::ir::{DType, Op, Tensor, TensorType, op::UnaryOp};

    #[test]
    fn small_graph() {
        let mut g = Graph::new("net");
        let x = g.add_input("x", TensorType::new(DType::F32, &[2]));
        let w = g.add_const(Tensor::f32(vec![2], vec![1.0, 2.0]), Some("w".into()), None);
        let y = g.add_node(
            Op::Unary(UnaryOp::Exp),
            vec![x],
            vec![TensorType::new(DType::F32, &[2])],
        )[0];
        g.add_node(
            Op::Unary(UnaryOp::Neg),
            vec![w],
            vec![TensorType::new(DType::F32, &[2])],
        );
        g.outputs.push(y);
        expect_test::expect![[r##"
            digraph "net" {
              rankdir=TB;
              node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica", fontsize=10];
              edge [fontname="Helvetica", fontsize=8, color="#555555"];
              in0 [shape=oval, fillcolor="#dff0d8", label="x\nf32[2]"];
              n0 [label="exp"];
              in0 -> n0 [label="f32[2]"];
              n1 [label="neg\n· f32[2]"];
              out0 [shape=oval, fillcolor="#fcf8e3", label="%v2\nf32[2]"];
              n0 -> out0;
            }
        "##]]
        .assert_eq(&to_dot(&g));
    }
}
