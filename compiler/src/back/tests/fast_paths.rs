//! Differential tests of the performance paths of `back::select` (phase-GEMM deconv,
//! fused element-wise chains, aliasing reshapes): random cases against `ir::interp`, plus
//! checks that the fast path was actually taken (so a silent fallback cannot hide a
//! regression).

use super::harness::{Rng, load, opts};
use super::window::{Arg, Batch, Below};
use crate::ir::{Border, ConvAttrs, DType, Graph, Op, Tensor};

fn deconv_case(r: &mut Rng) -> (Vec<usize>, Vec<usize>, ConvAttrs) {
    let sp = 1 + r.below(2);
    let groups = [1, 1, 2, 3][r.below(4)];
    let n = 1 + r.below(2);
    let cin = groups * (1 + r.below(3));
    let og = 1 + r.below(3);
    let mut xs = vec![n, cin];
    let mut fs = vec![cin, og];
    for _ in 0..sp {
        xs.push(1 + r.below(7));
        fs.push(1 + r.below(5));
    }
    let a = ConvAttrs {
        border: if r.below(2) == 0 {
            Border::Constant
        } else {
            Border::Ignore
        },
        padding: if r.below(3) == 0 {
            Vec::new()
        } else {
            (0..sp).map(|_| (r.below(4), r.below(4))).collect()
        },
        stride: (0..sp).map(|_| 1 + r.below(3)).collect(),
        dilation: (0..sp)
            .map(|_| if r.below(4) == 0 { 2 } else { 1 })
            .collect(),
        groups,
        output_shape: Vec::new(),
    };
    (xs, fs, a)
}

#[test]
fn deconv_phase_gemm_matches_interp() {
    let mut r = Rng::new(41);
    let mut b = Batch::new();
    let mut tries = 0;
    while b.len() < 40 && tries < 4000 {
        tries += 1;
        let (xs, fs, a) = deconv_case(&mut r);
        let x = r.tensor(DType::F32, &xs, -1.0, 1.0);
        let f = r.tensor(DType::F32, &fs, -1.0, 1.0);
        let cout = fs[1] * a.groups;
        let bias = if r.below(2) == 0 {
            r.tensor(DType::F32, &[1, cout], -1.0, 1.0)
        } else {
            r.tensor(DType::F32, &[1, 1], -1.0, 1.0)
        };
        b.add(
            format!("deconv x{xs:?} f{fs:?} {a:?}"),
            Op::Deconv(a),
            vec![Arg::In(x), Arg::Const(f), Arg::Const(bias)],
        );
    }
    assert!(b.len() >= 30, "only {} valid cases", b.len());
    b.check("deconvp");
}

#[test]
fn deconv_takes_the_phase_path() {
    let mut g = Graph::new("d");
    let x = g.add_input("x", crate::ir::TensorType::new(DType::F32, &[1, 8, 16, 16]));
    let mut r = Rng::new(5);
    let f = g.add_const(r.tensor(DType::F32, &[8, 8, 4, 4], -1.0, 1.0), None, None);
    let bias = g.add_const(Tensor::f32(vec![1, 8], vec![0.5; 8]), None, None);
    let a = ConvAttrs {
        border: Border::Constant,
        padding: vec![(1, 1), (1, 1)],
        stride: vec![2, 2],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    };
    let op = Op::Deconv(a);
    let tys = [g.ty(x).clone(), g.ty(f).clone(), g.ty(bias).clone()];
    let out = crate::ir::infer::infer(&op, &[&tys[0], &tys[1], &tys[2]]).unwrap();
    let y = g.add_node(op, vec![x, f, bias], out)[0];
    g.outputs.push(y);
    let l = load(&g, &opts("dp"));
    let k = &l.art.kernels;
    assert!(k.contains("deconv_phase"), "{k}");
    assert!(!k.contains("zero_insert"), "{k}");
    // k = 4, s = 2: each of the 4 phases takes 2×2 taps; per phase two GEMMs over
    // 2 taps × 8 channels (the second accumulating), no multiply-adds on zeros.
    assert_eq!(k.matches("m=8 n=256 k=16 batches=4").count(), 2, "{k}");
    assert_eq!(k.matches("accumulate=true").count(), 1, "{k}");
}

/// A random graph of element-wise nodes over operands that broadcast into one shape,
/// with reductions in between (they end chains and make the memory plan reuse slots) and
/// some intermediates listed as graph outputs (they must not be fused away).
fn chain_graph(r: &mut Rng) -> Option<(Graph, Vec<Tensor>)> {
    use crate::ir::infer::infer;
    use crate::ir::{BinaryOp, ReduceOp, TensorType, UnaryOp};
    let rank = 1 + r.below(4);
    let full: Vec<usize> = (0..rank)
        .map(|d| {
            if d + 1 == rank {
                3 + r.below(9)
            } else {
                1 + r.below(4)
            }
        })
        .collect();
    let sub_shape = |r: &mut Rng| -> Vec<usize> {
        let keep = 1 + r.below(rank);
        (0..keep)
            .map(|d| if r.below(3) == 0 { 1 } else { full[d] })
            .collect()
    };
    let mut g = Graph::new("f");
    let mut inputs = Vec::new();
    let mut pool = Vec::new();
    for i in 0..(2 + r.below(2)) {
        let s = if i == 0 { full.clone() } else { sub_shape(r) };
        let t = r.tensor(DType::F32, &s, -1.0, 1.0);
        pool.push(g.add_input(format!("x{i}"), t.ty()));
        inputs.push(t);
    }
    let nodes = 5 + r.below(10);
    for _ in 0..nodes {
        let pick = |r: &mut Rng, pool: &[crate::ir::ValueId]| {
            pool[pool.len() - 1 - r.below(pool.len().min(4))]
        };
        let a = pick(r, &pool);
        let (op, ins) = match r.below(12) {
            0..=3 => {
                let u = [
                    UnaryOp::Neg,
                    UnaryOp::Abs,
                    UnaryOp::Relu,
                    UnaryOp::Tanh,
                    UnaryOp::Sigmoid,
                    UnaryOp::Sqr,
                    UnaryOp::Exp,
                ][r.below(7)];
                (Op::Unary(u), vec![a])
            }
            4..=7 => {
                let b = if r.below(4) == 0 {
                    let s = sub_shape(r);
                    g.add_const(r.tensor(DType::F32, &s, 0.5, 1.5), None, None)
                } else {
                    pick(r, &pool)
                };
                let op = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Min,
                    BinaryOp::Max,
                ][r.below(5)];
                if r.below(2) == 0 {
                    (Op::Binary(op), vec![a, b])
                } else {
                    (Op::Binary(op), vec![b, a])
                }
            }
            8 => {
                let e = [1.0f32, 2.0, 3.0, 0.5][r.below(4)];
                let base = if e == 0.5 {
                    let t = infer(&Op::Unary(UnaryOp::Abs), &[g.ty(a)]).ok()?;
                    g.add_node(Op::Unary(UnaryOp::Abs), vec![a], t)[0]
                } else {
                    a
                };
                let c = g.add_const(Tensor::f32(vec![], vec![e]), None, None);
                (Op::Binary(BinaryOp::Pow), vec![base, c])
            }
            9 => {
                let lo = g.add_const(Tensor::f32(vec![], vec![-0.5]), None, None);
                let hi = g.add_const(Tensor::f32(vec![], vec![0.75]), None, None);
                (Op::Clamp, vec![a, lo, hi])
            }
            10 => {
                let ds = sub_shape(r);
                let d = g.add_const(r.tensor(DType::F32, &ds, 1.0, 2.0), None, None);
                (Op::Binary(BinaryOp::Div), vec![a, d])
            }
            _ => {
                let rk = g.ty(a).shape()?.len();
                (
                    Op::Reduce {
                        op: ReduceOp::Mean,
                        axes: vec![rk - 1],
                    },
                    vec![a],
                )
            }
        };
        let tys: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let Ok(out) = infer(&op, &refs) else { continue };
        let v = g.add_node(op, ins, out)[0];
        pool.push(v);
        if r.below(8) == 0 {
            g.outputs.push(v);
        }
    }
    let last = *pool.last()?;
    if !g.outputs.contains(&last) {
        g.outputs.push(last);
    }
    Some((g, inputs))
}

#[test]
fn fused_chains_match_interp() {
    let mut r = Rng::new(77);
    let mut fused = 0;
    let mut cases = 0;
    for i in 0..400 {
        if cases >= 30 {
            break;
        }
        let Some((g, inputs)) = chain_graph(&mut r) else {
            continue;
        };
        let Ok(want) = crate::ir::interp::run(&g, &inputs) else {
            continue;
        };
        if want
            .iter()
            .any(|t| t.as_f32().is_some_and(|d| d.iter().any(|x| !x.is_finite())))
        {
            continue;
        }
        cases += 1;
        let m = load(&g, &opts(&format!("fc{i}")));
        fused += m.art.kernels.matches("_fused").count();
        let got = m.run(&inputs).expect("status 0");
        for (j, (gt, wt)) in got.iter().zip(&want).enumerate() {
            super::harness::assert_close(
                &format!("case {i} output {j}\n{}", m.art.kernels),
                gt,
                wt,
            );
        }
    }
    assert!(cases >= 30, "only {cases} cases");
    assert!(fused >= 20, "only {fused} fused kernels over {cases} cases");
}

#[test]
fn layer_norm_tail_is_one_kernel() {
    // mean → +ε → sqrt → (x − mean)/… → ·γ → +β: one reduction kernel per mean and one
    // fused kernel for everything after the second mean; pow(·, 2) is a multiplication.
    let src = "version 1.0;
    graph G(x) -> (y) {
        x = external<scalar>(shape = [2, 8]);
        m = mean_reduce(x, axes = [1]);
        d = sub(x, m);
        p = pow(d, 2.0);
        v = mean_reduce(p, axes = [1]);
        e = add(v, 1e-5);
        s = sqrt(e);
        n = div(d, s);
        w = mul(n, 1.5);
        y = add(w, 0.25);
    }";
    let g = crate::front::lower_source("ln", src, &|_| None, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.render()))
        .graph;
    let m = load(&g, &opts("ln"));
    let k = &m.art.kernels;
    assert_eq!(
        k.matches("\nkernel ").count() + usize::from(k.starts_with("kernel ")),
        5,
        "{k}"
    );
    assert!(!k.contains(" pow "), "{k}");
}

/// Times unetish's deconv alone (ignored: a measuring tool,
/// `cargo test -p nnefc-compiler --lib deconv_alone_timing -- --ignored --nocapture`).
#[test]
#[ignore]
fn deconv_alone_timing() {
    let mut g = Graph::new("d");
    let x = g.add_input("x", crate::ir::TensorType::new(DType::F32, &[1, 8, 16, 16]));
    let mut r = Rng::new(5);
    let xt = r.tensor(DType::F32, &[1, 8, 16, 16], -1.0, 1.0);
    let f = g.add_const(r.tensor(DType::F32, &[8, 8, 4, 4], -1.0, 1.0), None, None);
    let bias = g.add_const(Tensor::f32(vec![1, 8], vec![0.5; 8]), None, None);
    let a = ConvAttrs {
        border: Border::Constant,
        padding: vec![(1, 1), (1, 1)],
        stride: vec![2, 2],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    };
    let op = Op::Deconv(a);
    let tys = [g.ty(x).clone(), g.ty(f).clone(), g.ty(bias).clone()];
    let out = crate::ir::infer::infer(&op, &[&tys[0], &tys[1], &tys[2]]).unwrap();
    let y = g.add_node(op, vec![x, f, bias], out)[0];
    g.outputs.push(y);
    let l = load(&g, &opts("dt"));
    println!("deconv alone: {:?}", l.time(&[xt], 5000));
}
