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
    assert!(k.contains("m=32 n=256 k=72"), "{k}");
}
