//! Round-trip tests of the text form: `print(parse(t)) == t` on canonical texts,
//! `parse(print(g)) == g` on built graphs, and parse errors with their positions.

use super::*;
use crate::ir::infer::infer;
use crate::ir::print::{PrintOptions, print, print_with};
use expect_test::expect;

const WITH_DATA: PrintOptions = PrintOptions { const_data: true };

fn roundtrip(text: &str, options: PrintOptions) {
    let g = match parse(text) {
        Ok(g) => g,
        Err(e) => panic!("parse failed: {e}\n{text}"),
    };
    assert_eq!(print_with(&g, options), text);
}

#[test]
fn print_parse_roundtrips() {
    let texts = [
        "nnefir 1\ngraph main() -> () {\n}\n",
        "nnefir 1\ngraph g(%v0 \"x\": f32[1,3]) -> (%v0, %v0) {\n}\n",
        "nnefir 1\ngraph \"my-net\"(%v0: f32[?,3]{0,1}) -> (%v1) {\n  %v1: f32[?,3] = relu(%v0)\n}\n",
        concat!(
            "nnefir 1\n",
            "graph main(%v0 \"input\": f32[1,3,224,224]) -> (%v2) {\n",
            "  %c0 \"w\": f32[64,3,7,7] = const \"conv1/filter\"      ; 37632 B\n",
            "  %c1: f32[1,64] = const      ; 256 B\n",
            "  %v1: f32[1,64,112,112] = conv(%v0, %c0, %c1) border=constant padding=[(3,3),(3,3)] stride=[2,2] dilation=[1,1] groups=1\n",
            "  %v2: f32[1,64,56,56] = max_pool(%v1) size=[1,1,3,3] border=ignore padding=[] stride=[1,1,2,2] dilation=[]\n",
            "}\n"
        ),
        concat!(
            "nnefir 1\n",
            "graph ops(%v0: f32[2,8], %v1: i32[3], %v2: bool[2,8]) -> (%v3, %v4, %v5, %v6, %v7, %v8) {\n",
            "  %v3: f32[2,4], %v4: f32[2,4] = split(%v0) axis=1 ratios=[1,1]\n",
            "  %v5: f32[2,8] = elu(%v0) alpha=1.0\n",
            "  %v6: f32[2,8] = selu(%v0) alpha=1.6732632 lambda=1.050701\n",
            "  %v7: f32[2,8] = select(%v2, %v0, %v5)\n",
            "  %v8: f32[2,3] = gather(%v0, %v1) axis=1\n",
            "  %v9: f32[8,2] = transpose(%v0) axes=[1,0]\n",
            "  %v10: f32[16] = reshape(%v0) shape=[-1] axis_start=0 axis_count=-1\n",
            "  %v11: f32[2,3] = slice(%v0) axes=[1] begin=[-1] end=[-9] stride=[-3]\n",
            "  %v12: f32[1,8] = sum_reduce(%v0) axes=[0]\n",
            "  %v13: i32[2,1] = argmax_reduce(%v0) axes=[1]\n",
            "  %v14: i32[2,8] = cast(%v0) to=i32\n",
            "  %v15: f32[2,12] = pad(%v0) padding=[(0,0),(2,2)] border=reflect-even value=-inf\n",
            "  %v16: f32[2,8] = batch_normalization(%v0, %v12, %v12, %v12, %v12) epsilon=1e-5\n",
            "  %v17: f32[8,8] = matmul(%v0, %v0) transposeA=true transposeB=false\n",
            "  () = unstack(%v10) axis=0\n",
            "}\n"
        ),
        concat!(
            "nnefir 1\n",
            "graph consts() -> (%c0, %c1, %c2) {\n",
            "  %c0: f32[2,2] = const \"a\" [1.0,-2.5,NaN,1e-7]\n",
            "  %c1: i32[3] = const [1,-2,3]\n",
            "  %c2 \"flag\": bool[] = const [true]\n",
            "  %c3: f32[0] = const []\n",
            "}\n"
        ),
        concat!(
            "nnefir 1\n",
            "graph windows(%v0: f32[1,2,8,8]) -> (%v1, %v2, %v3, %v4, %v5, %v6) {\n",
            "  %v1: f32[1,2,4,4] = box(%v0) size=[1,1,2,2] border=constant padding=[] stride=[1,1,2,2] dilation=[] normalize=true\n",
            "  %v2: f32[1,2,8,8] = debox(%v1) size=[1,1,2,2] border=ignore padding=[] stride=[1,1,2,2] dilation=[] output_shape=[1,2,8,8] normalize=false\n",
            "  %v3: i32[1,2,4,4] = argmax_pool(%v0) size=[1,1,2,2] border=constant padding=[] stride=[1,1,2,2] dilation=[]\n",
            "  %v4: f32[1,2,4,4] = sample(%v0, %v3) size=[1,1,2,2] border=constant padding=[] stride=[1,1,2,2] dilation=[]\n",
            "  %v5: f32[1,2,8,8] = desample(%v4, %v3) size=[1,1,2,2] border=constant padding=[] stride=[1,1,2,2] dilation=[] output_shape=[]\n",
            "  %v6: f32[1,2,16,16] = multilinear_upsample(%v0) factor=[2,2] method=aligned border=replicate\n",
            "  %v7: f32[3,2,2,2] = roi_resample(%v0, %v0, %v0) output_size=[2,2] method=symmetric\n",
            "  %v8: f32[3,2,2,2] = avg_roi_pool(%v0, %v0, %v0) output_size=[2,2]\n",
            "  %v9: f32[1,2,8,8] = deconv(%v0, %v0, %v0) border=constant padding=[] stride=[] dilation=[] output_shape=[] groups=0\n",
            "}\n"
        ),
    ];
    for (i, t) in texts.iter().enumerate() {
        let options = if i == 5 {
            WITH_DATA
        } else {
            PrintOptions::default()
        };
        roundtrip(t, options);
    }
}

#[test]
fn parse_accepts_free_numbering_and_layout() {
    let text = "nnefir 1 ; version\ngraph g(%in: f32[2,3]) -> (%out) {\n  %w: f32[1,3] = const [1.0, 2.0, 3.0]\n  %out: f32[2,3] = add(%in, %w)\n}\n";
    let g = parse(text).expect("parses");
    expect![[r#"
        nnefir 1
        graph g(%v0: f32[2,3]) -> (%v1) {
          %c0: f32[1,3] = const [1.0,2.0,3.0]
          %v1: f32[2,3] = add(%v0, %c0)
        }
    "#]]
    .assert_eq(&print_with(&g, WITH_DATA));
}

/// Builds a small graph with the public builder in canonical order.
fn sample_graph() -> Graph {
    let mut g = Graph::new("net");
    let x = g.add_input("input", TensorType::new(DType::F32, &[1, 2, 4, 4]));
    let w = g.add_const(
        Tensor::f32(vec![4, 2, 1, 1], (0..8).map(|i| i as f32 * 0.5).collect()),
        Some("w".into()),
        None,
    );
    let b = g.add_const(
        Tensor::f32(vec![1, 4], vec![0.1, -0.2, 0.3, f32::INFINITY]),
        None,
        Some("bias".into()),
    );
    let idx = g.add_const(Tensor::i32(vec![2], vec![0, 3]), None, None);
    let mask = g.add_const(Tensor::bool(vec![1], vec![true]), None, None);
    let conv = Op::Conv(ConvAttrs {
        border: Border::Constant,
        padding: vec![],
        stride: vec![1, 1],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    });
    let add = |g: &mut Graph, op: Op, ins: Vec<ValueId>| -> Vec<ValueId> {
        let tys: Vec<TensorType> = ins.iter().map(|&v| g.ty(v).clone()).collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let out = infer(&op, &refs).expect("infers");
        g.add_node(op, ins, out)
    };
    let y = add(&mut g, conv, vec![x, w, b]);
    let z = add(
        &mut g,
        Op::Unary(UnaryOp::LeakyRelu { alpha: 0.1 }),
        vec![y[0]],
    );
    let s = add(
        &mut g,
        Op::Split {
            axis: 1,
            ratios: vec![1, 3],
        },
        vec![z[0]],
    );
    let r = add(
        &mut g,
        Op::Reduce {
            op: ReduceOp::Any,
            axes: vec![0],
        },
        vec![mask],
    );
    let gth = add(&mut g, Op::Gather { axis: 1 }, vec![s[1], idx]);
    g.values[gth[0].index()].name = Some("gathered".into());
    g.outputs = vec![gth[0], s[0], r[0]];
    g
}

#[test]
fn parse_print_graph_roundtrip() {
    let g = sample_graph();
    let text = print_with(&g, WITH_DATA);
    expect![[r#"
        nnefir 1
        graph net(%v0 "input": f32[1,2,4,4]) -> (%v6, %v3, %v5) {
          %c0: f32[4,2,1,1] = const "w" [0.0,0.5,1.0,1.5,2.0,2.5,3.0,3.5]
          %c1 "bias": f32[1,4] = const [0.1,-0.2,0.3,inf]
          %c2: i32[2] = const [0,3]
          %c3: bool[1] = const [true]
          %v1: f32[1,4,4,4] = conv(%v0, %c0, %c1) border=constant padding=[] stride=[1,1] dilation=[] groups=1
          %v2: f32[1,4,4,4] = leaky_relu(%v1) alpha=0.1
          %v3: f32[1,1,4,4], %v4: f32[1,3,4,4] = split(%v2) axis=1 ratios=[1,3]
          %v5: bool[1] = any_reduce(%c3) axes=[0]
          %v6 "gathered": f32[1,2,4,4] = gather(%v4, %c2) axis=1
        }
    "#]]
    .assert_eq(&text);
    assert_eq!(parse(&text), Ok(g.clone()));
    // Elided data: same structure, zero data.
    let elided = parse(&print(&g)).expect("parses");
    assert_eq!(elided.nodes, g.nodes);
    assert_eq!(elided.values, g.values);
    assert_eq!(elided.consts[2].tensor, Tensor::i32(vec![2], vec![0, 0]));
}

#[test]
fn parse_errors() {
    let cases = [
        "",
        "nnefir 2\ngraph g() -> () {\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %v1: f32[2] = relu(%v0)\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> (%v9) {\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v0: f32[2] = relu(%v0)\n}\n",
        "nnefir 1\ngraph g(%v0: f64[2]) -> () {\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = frobnicate(%v0)\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = elu(%v0)\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = relu(%v0) alpha=1.0\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = squeeze(%v0) axes=[-1]\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = squeeze(%v0) axes=[0] axes=[0]\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2]) -> () {\n  %v1: f32[2] = pad(%v0) padding=[(1,1)] border=mirror value=0.0\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %c0: f32[2] = const [1.0]\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %c0: f32[?] = const\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %c0: i32[1] = const [1.5]\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %c0: f32[1] = const \"oops\n}\n",
        "nnefir 1\ngraph g(%v0: f32[2,3]{0}) -> () {\n}\n",
        "nnefir 1\ngraph g() -> () {\n  %c0: f32[1] = const [1.0]\n}\nextra\n",
        "nnefir 1\ngraph g() -> () {\n  @\n}\n",
        "nnefir 1\ngraph g() -> () {\n",
    ];
    let mut s = String::new();
    for c in cases {
        match parse(c) {
            Ok(_) => s.push_str("ok?!\n"),
            Err(e) => s.push_str(&format!("{e}\n")),
        }
    }
    expect![[r#"
        1:1: expected `nnefir`, found end of input
        1:8: unsupported text version 2 (this parser reads 1)
        3:22: %v0 is not defined
        2:26: graph output %v9 is not defined
        3:3: %v0 is defined twice
        2:14: unknown dtype `f64` (f32, i32 or bool)
        3:17: unknown op `frobnicate`
        3:17: missing attribute `alpha`
        3:27: unknown attribute `alpha` for this op
        3:30: attribute `axes` must not be negative, got -1
        3:39: attribute `axes` given twice
        3:42: unknown border `mirror`
        3:23: constant %c0 has 1 values but type f32[2] has 2 elements
        3:3: constant type f32[?] must have known extents
        3:24: expected an i32, found `1.5`
        3:23: unterminated string
        2:22: layout has 1 entries but the type has rank 2
        5:1: expected end of input after `}`, found `extra`
        3:3: unexpected character `@`
        3:1: expected a value such as %v0, found end of input
    "#]]
    .assert_eq(&s);
}

/// Deterministic pseudo-random graphs (a tiny LCG keeps the test reproducible without a
/// seed file): `parse(print(g)) == g` and every generated graph verifies.
#[test]
fn random_graphs_roundtrip() {
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }
    let mut rng = Rng(7);
    for case in 0..200 {
        let mut g = Graph::new(format!("g{case}"));
        let rank = 1 + rng.below(3);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3)).collect();
        let mut pool = vec![g.add_input("x", TensorType::new(DType::F32, &shape))];
        let volume: usize = shape.iter().product();
        let data: Vec<f32> = (0..volume).map(|i| i as f32 / 3.0 - 1.0).collect();
        pool.push(g.add_const(
            Tensor::f32(shape.clone(), data),
            Some(format!("w{case}")),
            None,
        ));
        for _ in 0..1 + rng.below(8) {
            let a = pool[rng.below(pool.len())];
            let b = pool[rng.below(pool.len())];
            let r = g.ty(a).rank();
            let op = match rng.below(7) {
                0 => Op::Unary(UnaryOp::Exp),
                1 => Op::Unary(UnaryOp::Elu { alpha: 0.5 }),
                2 => Op::Binary(BinaryOp::Add),
                3 => Op::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![rng.below(r)],
                },
                4 => Op::Transpose {
                    axes: (0..r).rev().collect(),
                },
                5 => Op::Concat { axis: rng.below(r) },
                _ => Op::Softmax {
                    axes: vec![rng.below(r)],
                },
            };
            let ins = match op {
                Op::Binary(_) | Op::Concat { .. } => vec![a, b],
                _ => vec![a],
            };
            let tys: Vec<TensorType> = ins.iter().map(|&v| g.ty(v).clone()).collect();
            let refs: Vec<&TensorType> = tys.iter().collect();
            // Ill-typed picks (e.g. concat of different shapes) are skipped.
            if let Ok(out) = infer(&op, &refs) {
                pool.extend(g.add_node(op, ins, out));
            }
        }
        g.outputs = vec![pool[pool.len() - 1]];
        assert_eq!(crate::ir::verify::verify(&g), Ok(()));
        let text = print_with(&g, WITH_DATA);
        assert_eq!(parse(&text).as_ref(), Ok(&g), "{text}");
    }
}
