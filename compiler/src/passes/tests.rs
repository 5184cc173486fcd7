//! Tests of the passes: each rewrite must change the graph as documented and keep the
//! interpreter's results (checked on random inputs), and negative cases must report
//! `Changed::No`.

use super::*;
use crate::ir::infer::infer;
use crate::ir::{
    BinaryOp, Border, ConvAttrs, DType, Graph, Op, Tensor, TensorType, UnaryOp, ValueId,
};

fn node(g: &mut Graph, op: Op, inputs: &[ValueId]) -> ValueId {
    let tys: Vec<TensorType> = inputs.iter().map(|&v| g.ty(v).clone()).collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let out = infer(&op, &refs).expect("test graph is well typed");
    g.add_node(op, inputs.to_vec(), out)[0]
}

fn random(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let n = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::f32(shape.to_vec(), data)
}

fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes.iter().map(|n| n.op.mnemonic()).collect()
}

fn assert_same_results(before: &Graph, after: &Graph) {
    let inputs: Vec<Tensor> = before
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| random(&before.ty(v).shape().expect("known"), i as u64 + 7))
        .collect();
    let a = crate::ir::interp::run(before, &inputs).expect("before runs");
    let b = crate::ir::interp::run(after, &inputs).expect("after runs");
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.shape, y.shape);
        let (x, y) = (x.as_f32().expect("f32"), y.as_f32().expect("f32"));
        let scale = x.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-4 * scale, "{p} vs {q}");
        }
    }
}

fn conv_bn_graph() -> Graph {
    let mut g = Graph::new("t");
    let x = g.add_input("x", TensorType::new(DType::F32, &[1, 3, 8, 8]));
    let w = g.add_const(random(&[4, 3, 3, 3], 1), Some("w".into()), None);
    let b = g.add_const(random(&[1, 4], 2), Some("b".into()), None);
    let attrs = ConvAttrs {
        border: Border::Constant,
        padding: vec![],
        stride: vec![],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    };
    let c = node(&mut g, Op::Conv(attrs), &[x, w, b]);
    g.values[c.index()].name = Some("conv1".into());
    let mean = g.add_const(random(&[1, 4], 3), None, None);
    let mut var = random(&[1, 4], 4);
    if let crate::ir::TensorData::F32(v) = &mut var.data {
        v.iter_mut().for_each(|x| *x = x.abs() + 0.5);
    }
    let var = g.add_const(var, None, None);
    let off = g.add_const(random(&[1, 4], 5), None, None);
    let scale = g.add_const(random(&[1, 4], 6), None, None);
    let bn = node(
        &mut g,
        Op::BatchNorm { epsilon: 1e-5 },
        &[c, mean, var, off, scale],
    );
    let r = node(&mut g, Op::Unary(UnaryOp::Relu), &[bn]);
    g.outputs.push(r);
    g
}

#[test]
fn batch_norm_folds_into_conv() {
    let before = conv_bn_graph();
    let mut after = before.clone();
    let report = optimize(
        &mut after,
        &PassOptions {
            verify_each: true,
            ..Default::default()
        },
    )
    .expect("optimizes");
    assert_eq!(ops(&after), ["conv", "relu"], "{report}");
    // The folded conv keeps the user's conv name (what dumps and `--profile` show).
    let conv_out = after.nodes[0].outputs[0];
    assert_eq!(after.value(conv_out).name.as_deref(), Some("conv1"));
    assert_same_results(&before, &after);
}

#[test]
fn batch_norm_of_shared_conv_is_kept() {
    let mut g = conv_bn_graph();
    // A second use of the conv result forbids folding.
    let conv_out = g.nodes[0].outputs[0];
    let extra = node(&mut g, Op::Unary(UnaryOp::Neg), &[conv_out]);
    g.outputs.push(extra);
    let mut s = simplify::Simplify;
    assert_eq!(s.run(&mut g).expect("runs"), Changed::No);
}

#[test]
fn constant_subgraphs_fold_and_dead_nodes_go() {
    let mut g = Graph::new("t");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 3]));
    let c = g.add_const(random(&[3, 2], 9), None, None);
    let t = node(&mut g, Op::Transpose { axes: vec![1, 0] }, &[c]);
    let e = node(&mut g, Op::Unary(UnaryOp::Exp), &[t]);
    let y = node(&mut g, Op::Binary(BinaryOp::Add), &[x, e]);
    let _dead = node(&mut g, Op::Unary(UnaryOp::Tanh), &[x]);
    g.outputs.push(y);
    let before = g.clone();
    optimize(
        &mut g,
        &PassOptions {
            verify_each: true,
            ..Default::default()
        },
    )
    .expect("optimizes");
    assert_eq!(ops(&g), ["add"]);
    assert_eq!(g.consts.len(), 1);
    assert_same_results(&before, &g);
}

#[test]
fn identities_and_transpose_pairs_simplify() {
    let mut g = Graph::new("t");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 3, 4]));
    let a = node(&mut g, Op::Unary(UnaryOp::Copy), &[x]);
    let one = g.add_const(Tensor::f32(vec![], vec![1.0]), None, None);
    let b = node(&mut g, Op::Binary(BinaryOp::Mul), &[a, one]);
    let t1 = node(
        &mut g,
        Op::Transpose {
            axes: vec![1, 0, 2],
        },
        &[b],
    );
    let t2 = node(
        &mut g,
        Op::Transpose {
            axes: vec![2, 1, 0],
        },
        &[t1],
    );
    let y = node(&mut g, Op::Unary(UnaryOp::Relu), &[t2]);
    g.outputs.push(y);
    let before = g.clone();
    optimize(
        &mut g,
        &PassOptions {
            verify_each: true,
            ..Default::default()
        },
    )
    .expect("optimizes");
    assert_eq!(ops(&g), ["transpose", "relu"]);
    assert_same_results(&before, &g);
}

#[test]
fn graph_outputs_are_never_aliased_away() {
    let mut g = Graph::new("t");
    let x = g.add_input("x", TensorType::new(DType::F32, &[4]));
    let y = node(&mut g, Op::Unary(UnaryOp::Copy), &[x]);
    g.values[y.index()].name = Some("y".into());
    g.outputs.push(y);
    let mut s = simplify::Simplify;
    assert_eq!(s.run(&mut g).expect("runs"), Changed::No);
    assert_eq!(ops(&g), ["copy"]);
}

#[test]
fn unchanged_graph_reports_no_change() {
    let mut g = Graph::new("t");
    let x = g.add_input("x", TensorType::new(DType::F32, &[4]));
    let y = node(&mut g, Op::Unary(UnaryOp::Exp), &[x]);
    g.outputs.push(y);
    for pass in [
        &mut const_fold::ConstFold::default() as &mut dyn Pass,
        &mut simplify::Simplify,
        &mut dce::Dce,
    ] {
        assert_eq!(
            pass.run(&mut g).expect("runs"),
            Changed::No,
            "{}",
            pass.name()
        );
    }
}

/// Runs `simplify` on the IR text of each case and prints the graph after it, constants
/// with their data (so the sign of a zero shows).
fn simplify_cases(cases: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (name, text) in cases {
        let mut g = crate::ir::parse::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        crate::ir::verify::verify(&g).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let before = g.clone();
        let changed = simplify::Simplify.run(&mut g).expect("runs");
        crate::ir::verify::verify(&g).unwrap_or_else(|e| panic!("{name} after: {e:?}"));
        assert_same_results(&before, &g);
        out.push_str(&format!("== {name}: {changed:?}\n"));
        out.push_str(&crate::ir::print::print_with(
            &g,
            crate::ir::print::PrintOptions { const_data: true },
        ));
    }
    out
}

/// `x OP c` (or `c OP x`) on an f32[2,3] input, with the constant `c` of shape `shape`
/// and data `data`, followed by `exp` so that the result is not a graph output (outputs
/// are never aliased away).
fn binary_case(op: &str, const_first: bool, shape: &str, data: &str) -> String {
    let operands = if const_first { "%c0, %v0" } else { "%v0, %c0" };
    format!(
        "nnefir 1\ngraph t(%v0 \"x\": f32[2,3]) -> (%v2) {{\n  %c0: f32[{shape}] = const {data}\n  \
         %v1: f32[2,3] = {op}({operands})\n  %v2: f32[2,3] = exp(%v1)\n}}\n"
    )
}

/// Only identities exact for every IEEE value fold: x + (−0), (−0) + x, x − (+0), x · 1,
/// 1 · x, x / 1. `x + (+0)` and `x − (−0)` stay (for x = −0 they give +0, not x), and so
/// does a zero constant of mixed signs.
#[test]
fn only_ieee_exact_identities_fold() {
    let cases: Vec<(&str, String)> = vec![
        ("x + (-0)", binary_case("add", false, "", "[-0.0]")),
        ("(-0) + x", binary_case("add", true, "", "[-0.0]")),
        ("x - (+0)", binary_case("sub", false, "", "[0.0]")),
        ("x * 1", binary_case("mul", false, "", "[1.0]")),
        ("1 * x", binary_case("mul", true, "", "[1.0]")),
        ("x / 1", binary_case("div", false, "", "[1.0]")),
        (
            "x + (-0) broadcast per row",
            binary_case("add", false, "2,1", "[-0.0,-0.0]"),
        ),
        ("x + (+0) stays", binary_case("add", false, "", "[0.0]")),
        ("(+0) + x stays", binary_case("add", true, "", "[0.0]")),
        ("x - (-0) stays", binary_case("sub", false, "", "[-0.0]")),
        ("(+0) - x stays", binary_case("sub", true, "", "[0.0]")),
        ("1 / x stays", binary_case("div", true, "", "[1.0]")),
        (
            "x + [-0, +0] stays",
            binary_case("add", false, "2,1", "[-0.0,0.0]"),
        ),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(n, t)| (*n, t.as_str())).collect();
    expect_test::expect![[r#"
        == x + (-0): Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == (-0) + x: Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == x - (+0): Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == x * 1: Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == 1 * x: Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == x / 1: Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == x + (-0) broadcast per row: Yes
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v1) {
          %v1: f32[2,3] = exp(%v0)
        }
        == x + (+0) stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[] = const [0.0]
          %v1: f32[2,3] = add(%v0, %c0)
          %v2: f32[2,3] = exp(%v1)
        }
        == (+0) + x stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[] = const [0.0]
          %v1: f32[2,3] = add(%c0, %v0)
          %v2: f32[2,3] = exp(%v1)
        }
        == x - (-0) stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[] = const [-0.0]
          %v1: f32[2,3] = sub(%v0, %c0)
          %v2: f32[2,3] = exp(%v1)
        }
        == (+0) - x stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[] = const [0.0]
          %v1: f32[2,3] = sub(%c0, %v0)
          %v2: f32[2,3] = exp(%v1)
        }
        == 1 / x stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[] = const [1.0]
          %v1: f32[2,3] = div(%c0, %v0)
          %v2: f32[2,3] = exp(%v1)
        }
        == x + [-0, +0] stays: No
        nnefir 1
        graph t(%v0 "x": f32[2,3]) -> (%v2) {
          %c0: f32[2,1] = const [-0.0,0.0]
          %v1: f32[2,3] = add(%v0, %c0)
          %v2: f32[2,3] = exp(%v1)
        }
    "#]]
    .assert_eq(&simplify_cases(&cases));
}

/// The interpreter agrees with the rule above on the values that tell the identities
/// apart: −0 + (+0) is +0, −0 + (−0) and −0 − (+0) are −0, and NaN and ±∞ pass through
/// the folded identities unchanged.
#[test]
fn signed_zero_arithmetic_in_the_interpreter() {
    let specials = [
        -0.0f32,
        0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.5,
    ];
    let run = |op: &str, c: &str| -> Vec<f32> {
        let text = binary_case(op, false, "", c).replace("exp(%v1)", "copy(%v1)");
        let g = crate::ir::parse::parse(&text).expect("parses");
        let x = Tensor::f32(vec![2, 3], specials.to_vec());
        let out = crate::ir::interp::run(&g, &[x]).expect("runs");
        out[0].as_f32().expect("f32").to_vec()
    };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let plus_zero = run("add", "[0.0]");
    assert_eq!(plus_zero[0].to_bits(), 0x0000_0000, "-0 + +0 is +0");
    for (op, c) in [
        ("add", "[-0.0]"),
        ("sub", "[0.0]"),
        ("mul", "[1.0]"),
        ("div", "[1.0]"),
    ] {
        let got = run(op, c);
        for (g, x) in got.iter().zip(&specials) {
            assert!(
                g.to_bits() == x.to_bits() || (g.is_nan() && x.is_nan()),
                "x {op} {c} for x = {x:?} gave {g:?}: {:#x?}",
                bits(&got)
            );
        }
    }
}
